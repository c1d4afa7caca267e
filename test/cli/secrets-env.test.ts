/** `skein run` reads SKEIN_SECRET_<NAME> into the engine's secrets: an http node's request gets the value, the output shows the placeholder. */
import { afterEach, describe, expect, it } from "vitest";
import { startServer, type TestServer } from "../local-server.js";
import { json, requireBuiltCli, Skein, workspace } from "./helpers.js";

requireBuiltCli();

const servers: TestServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

describe("SKEIN_SECRET_<NAME>", () => {
  it("gives skein run the secret NAME", async () => {
    const s = await startServer((req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ auth: req.headers.authorization ?? null }));
    });
    servers.push(s);
    const ws = workspace();
    const file = ws.file("call.json", {
      id: "call",
      nodes: [
        {
          node_id: "call",
          agent_type: "http",
          payload: { url: s.url, headers: { Authorization: "Bearer {{ secrets.API_TOKEN }}" } },
        },
      ],
    });
    const value = "env-secret-9d2c";
    const r = await new Skein(["run", file, "--db", ws.db, "--json"], ws.dir, {
      SKEIN_SECRET_API_TOKEN: value,
    }).result();
    expect(r.code, r.stderr).toBe(0);
    expect(s.requests[0]?.headers.authorization).toBe(`Bearer ${value}`);
    const run = json<{ nodes: { output: unknown; payload: unknown }[] }>(r);
    expect(run.nodes[0]?.output).toMatchObject({ body: { auth: "Bearer [secret API_TOKEN]" } });
    expect(r.stdout + r.stderr).not.toContain(value);
  });
});
