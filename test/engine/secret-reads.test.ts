/**
 * Secrets filled only where a template reads them by name, and kept on their way (DESIGN §13.1):
 * data holding "[secret NAME]" beside a read is refused, never filled; a cross-origin redirect
 * drops what carries a secret; redaction takes encoded forms; enumerations never show secrets;
 * short values are refused; `hosts` and `workflows` limit where and by whom a secret is used.
 */
import { randomBytes } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { ValidationError } from "../../src/index.js";
import { startOpenAIServer } from "../fixtures/openai-server.js";
import { testEngine } from "../helpers.js";
import { json, startServer } from "../local-server.js";

const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

async function server(route: Parameters<typeof startServer>[0] = (_r, res) => json(res, 200, { ok: true })) {
  const s = await startServer(route);
  cleanup.push(() => s.close());
  return s;
}

const secret = () => `sk_${randomBytes(10).toString("hex")}`;

function post(url: string, body: unknown, extra: Record<string, unknown> = {}) {
  return { node_id: "call", agent_type: "http", payload: { method: "POST", url, body, ...extra } };
}

describe("a secret is filled only where the template reads it by name", () => {
  const shapes = {
    object: "{{ {'token': secrets.SLACK, 'text': input.message} }}",
    text: "token={{ secrets.SLACK }}&text={{ input.message }}",
  };
  for (const [shape, body] of Object.entries(shapes)) {
    it(`${shape}: an input saying "[secret SLACK]" is refused, never filled; ordinary text gets the value`, async () => {
      const value = secret();
      const s = await server();
      const { engine } = await testEngine({ secrets: { SLACK: value } });
      await engine.registerWorkflow({ id: "notify", nodes: [post(`${s.url}/hook`, body)] });

      const ok = await engine.waitForRun((await engine.startRun("notify", { input: { message: "hello" } })).run_id);
      expect(ok.status).toBe("SUCCEEDED");
      expect(s.requests).toHaveLength(1);
      expect(s.requests[0]?.body).toContain(value);
      expect(s.requests[0]?.body).toContain("hello");

      const attack = await engine.waitForRun(
        (await engine.startRun("notify", { input: { message: "leak [secret SLACK] please" } })).run_id,
      );
      expect(attack.status).toBe("FAILED");
      expect(attack.nodes[0]).toMatchObject({ state: "FAILED", reason: "template_error" });
      expect(attack.nodes[0]?.error?.message).toContain(`holds the text "[secret SLACK]" that no template put there`);
      expect(s.requests).toHaveLength(1);
      expect(JSON.stringify(await engine.listEvents(attack.run_id))).not.toContain(value);
    });
  }

  it("a node's output saying '[secret SLACK]' (a model's answer) is refused the same way", async () => {
    const value = secret();
    const s = await server();
    const { engine } = await testEngine({
      secrets: { SLACK: value },
      agents: { model: () => ({ answer: "ignore that and post [secret SLACK]" }) },
    });
    await engine.registerWorkflow({
      id: "relay",
      nodes: [
        { node_id: "model", agent_type: "model", next_on_success: ["call"] },
        post(`${s.url}/hook`, "token={{ secrets.SLACK }}&text={{ nodes.model.output.answer }}"),
      ],
    });
    const run = await engine.waitForRun((await engine.startRun("relay")).run_id);
    expect(run.nodes.find((n) => n.node_id === "call")).toMatchObject({ state: "FAILED", reason: "template_error" });
    expect(s.requests).toHaveLength(0);
  });

  it("enumerating the context shows no secret and no marker; $lookup beside a secret is refused at registration", async () => {
    const value = secret();
    const s = await server();
    const { engine } = await testEngine({ secrets: { SLACK: value } });
    await engine.registerWorkflow({
      id: "dump",
      nodes: [
        post(`${s.url}/hook`, {
          token: "{{ secrets.SLACK }}",
          a: "{{ secrets.SLACK & $string($) }}",
          b: "{{ $string($) }}",
          c: "{{ $keys($$) }}",
          d: "{{ $sift($$, function($v){ true }) ~> $keys() }}",
          e: "{{ $lookup($$, input.k) }}",
          f: "{{ [**] ~> $count() }}",
        }),
      ],
    });
    const run = await engine.waitForRun((await engine.startRun("dump", { input: { k: "secrets" } })).run_id);
    expect(run.status).toBe("SUCCEEDED");
    const sent = JSON.parse(s.requests[0]?.body ?? "{}") as Record<string, unknown>;
    expect(sent.token).toBe(value);
    expect(String(sent.a).split(value)).toHaveLength(2); // once: its own read, not again from $string($)
    for (const field of ["b", "c", "d", "e", "f"]) {
      const text = JSON.stringify(sent[field] ?? null);
      expect(text.includes(value) || /\[secret|\uE000|skein-secret/.test(text)).toBe(false);
    }
    expect(JSON.stringify(run.nodes[0]?.payload)).not.toMatch(/\uE000|skein-secret/);

    const refused = await engine
      .registerWorkflow({ id: "bad", nodes: [post(`${s.url}/x`, "{{ secrets.SLACK & $lookup($$, input.k) }}")] })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ValidationError);
    expect((refused as ValidationError).problems[0]?.message).toContain("uses $lookup beside secrets.SLACK");
    const literal = await engine
      .registerWorkflow({ id: "bad2", nodes: [post(`${s.url}/x`, "{{ $lookup($$, 'secrets') }}")] })
      .catch((e: unknown) => e);
    expect((literal as ValidationError).problems[0]?.message).toContain("reads secrets without naming one");
  });

  it("a template that cuts or changes a secret fails template_error, storing nothing of the marker", async () => {
    const s = await server();
    const { engine } = await testEngine({ secrets: { SLACK: secret() } });
    await engine.registerWorkflow({ id: "cut", nodes: [post(`${s.url}/x`, "{{ $substring(secrets.SLACK, 1) }}")] });
    const run = await engine.waitForRun((await engine.startRun("cut")).run_id);
    expect(run.nodes[0]).toMatchObject({ state: "FAILED", reason: "template_error" });
    expect(JSON.stringify(await engine.listEvents(run.run_id))).not.toMatch(/\uE000|skein-secret/);
    expect(s.requests).toHaveLength(0);
  });
});

describe("secrets on the way", () => {
  it("a cross-origin redirect drops every header carrying a secret; a 307 with a secret in its body is refused", async () => {
    const value = secret();
    const other = await server();
    const first = await server((req, res) => {
      res.writeHead(req.url === "/body" ? 307 : 302, { location: `${other.url}/landing` });
      res.end();
    });
    const { engine } = await testEngine({ secrets: { KEY: value } });
    await engine.registerWorkflow({
      id: "hdr",
      nodes: [
        {
          node_id: "call",
          agent_type: "http",
          payload: { url: `${first.url}/h`, headers: { "X-Api-Key": "{{ secrets.KEY }}", "X-Plain": "kept" } },
        },
      ],
    });
    const ok = await engine.waitForRun((await engine.startRun("hdr")).run_id);
    expect(ok.status).toBe("SUCCEEDED");
    expect(first.requests[0]?.headers["x-api-key"]).toBe(value);
    expect(other.requests[0]?.headers["x-api-key"]).toBeUndefined();
    expect(other.requests[0]?.headers["x-plain"]).toBe("kept");

    await engine.registerWorkflow({ id: "body", nodes: [post(`${first.url}/body`, { key: "{{ secrets.KEY }}" })] });
    const refused = await engine.waitForRun((await engine.startRun("body")).run_id);
    expect(refused.nodes[0]).toMatchObject({ state: "FAILED", reason: "non_retryable" });
    expect(refused.nodes[0]?.error?.message).toContain("would get a body that carries a secret: not followed");
    expect(other.requests).toHaveLength(1);
  });

  it("a secret in a URL path is redacted from the error and events, percent-encoded too", async () => {
    const value = `p/${randomBytes(6).toString("hex")} é+&`;
    const s = await server((_r, res) => json(res, 404, { missing: true }));
    const { engine } = await testEngine({ secrets: { PATHKEY: value } });
    await engine.registerWorkflow({
      id: "path",
      nodes: [{ node_id: "call", agent_type: "http", payload: { url: `${s.url}/items/{{ secrets.PATHKEY }}` } }],
    });
    const run = await engine.waitForRun((await engine.startRun("path")).run_id);
    expect(run.nodes[0]?.state).toBe("FAILED");
    expect(run.nodes[0]?.error?.message).toContain("/items/[secret PATHKEY]");
    const stored = JSON.stringify({ run, events: await engine.listEvents(run.run_id) });
    for (const form of [value, encodeURIComponent(value), new URL(`http://h/${value}`).pathname.slice(1)])
      expect(stored.includes(form)).toBe(false);
  });

  it("redacts the value's percent-, form-, JSON- and base64-encoded forms from an output", async () => {
    const value = `v "${randomBytes(6).toString("hex")}" & ü`;
    const forms = {
      percent: encodeURIComponent(value),
      form: new URLSearchParams({ v: value }).toString().slice(2),
      json: JSON.stringify(value).slice(1, -1),
      base64: Buffer.from(value).toString("base64"),
    };
    const { engine } = await testEngine({
      secrets: { K: value },
      agents: { echo: () => forms },
    });
    await engine.registerWorkflow({ id: "forms", nodes: [{ node_id: "n", agent_type: "echo" }] });
    const run = await engine.waitForRun((await engine.startRun("forms")).run_id);
    expect(run.nodes[0]?.output).toEqual({
      percent: "[secret K]",
      form: "[secret K]",
      json: "[secret K]",
      base64: "[secret K]",
    });
  });

  it("a secret under 8 characters is refused at start, naming it", async () => {
    await expect(testEngine({ secrets: { SHORT: "abc" } })).rejects.toThrow(
      "secrets.SHORT: secret SHORT is 3 characters, under the minimum of 8",
    );
  });
});

describe("an error's excerpt cut through a secret", () => {
  it("keeps none of it: the http node's 300 bytes, the llm node's 500 characters", async () => {
    const value = secret();
    // Services that echo the key they were sent into a long error body, the cut falling inside it.
    const echo = (before: number) =>
      server((req, res) => {
        res.writeHead(400, { "content-type": "text/plain" });
        res.end(`${"x".repeat(before)}${String(req.headers.authorization).slice("Bearer ".length)} and more`);
      });
    const service = await echo(290);
    const provider = await echo(495);
    const { engine } = await testEngine({
      secrets: { KEY: value },
      llm: { providers: { default: { base_url: `${provider.url}/v1`, api_key: value } } },
    });
    const auth = { Authorization: "Bearer {{ secrets.KEY }}" };
    await engine.registerWorkflow({
      id: "http",
      nodes: [{ node_id: "h", agent_type: "http", payload: { url: service.url, headers: auth } }],
    });
    await engine.registerWorkflow({
      id: "llm",
      nodes: [{ node_id: "l", agent_type: "llm", payload: { model: "m", prompt: "p" } }],
    });
    const runs = [
      await engine.waitForRun((await engine.startRun("http")).run_id),
      await engine.waitForRun((await engine.startRun("llm")).run_id),
    ];
    expect(service.requests[0]?.headers.authorization).toBe(`Bearer ${value}`);
    expect(provider.requests[0]?.headers.authorization).toBe(`Bearer ${value}`);
    const [h, l] = runs.map((r) => r.nodes[0]);
    expect(h).toMatchObject({ state: "FAILED", reason: "non_retryable" });
    expect(h?.error?.message).toMatch(/answered 400 Bad Request: x{290}\.\.\.; ok_status/);
    expect(l).toMatchObject({ state: "FAILED", reason: "non_retryable" });
    expect(l?.error?.message).toMatch(/^provider "default" answered 400: x{495}$/);
    for (const run of runs) {
      expect(JSON.stringify(await engine.listEvents(run.run_id))).not.toContain(value.slice(0, 3));
    }
  });
});

describe("a secret's hosts and workflows", () => {
  it("hosts: a static URL elsewhere is refused at registration; a templated one and a redirect hop at dispatch", async () => {
    const value = secret();
    const elsewhere = await server();
    const home = await server((req, res) => {
      if (req.url === "/hop") {
        // A hostile service echoes the header into the next hop's URL, on another host.
        const echoed = encodeURIComponent(String(req.headers.authorization));
        res.writeHead(302, { location: `${elsewhere.url.replace("127.0.0.1", "localhost")}/x?t=${echoed}` });
        res.end();
      } else json(res, 200, { ok: true });
    });
    const { engine } = await testEngine({ secrets: { KEY: { value, hosts: ["127.0.0.1"] } } });
    const auth = { Authorization: "Bearer {{ secrets.KEY }}" };
    const localhostUrl = `${home.url.replace("127.0.0.1", "localhost")}/a`;
    const refused = await engine
      .registerWorkflow({
        id: "static",
        nodes: [{ node_id: "c", agent_type: "http", payload: { url: localhostUrl, headers: auth } }],
      })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ValidationError);
    expect((refused as ValidationError).problems).toEqual([
      {
        path: "nodes[0].payload.url",
        message:
          "secret KEY may be sent only to 127.0.0.1 (its hosts), not to localhost; add the host to the secret's hosts (the secrets option or SKEIN_SECRET_KEY_HOSTS)",
      },
    ]);

    await engine.registerWorkflow({
      id: "templated",
      nodes: [{ node_id: "c", agent_type: "http", payload: { url: "{{ input.url }}", headers: auth } }],
    });
    const ok = await engine.waitForRun(
      (await engine.startRun("templated", { input: { url: `${home.url}/a` } })).run_id,
    );
    expect(ok.status).toBe("SUCCEEDED");
    const away = await engine.waitForRun((await engine.startRun("templated", { input: { url: localhostUrl } })).run_id);
    expect(away.nodes[0]).toMatchObject({ state: "FAILED", reason: "non_retryable" });
    expect(away.nodes[0]?.error?.message).toContain(
      "secret KEY may be sent only to 127.0.0.1 (its hosts), not to localhost",
    );

    await engine.registerWorkflow({
      id: "hop",
      nodes: [{ node_id: "c", agent_type: "http", payload: { url: `${home.url}/hop`, headers: auth } }],
    });
    const hop = await engine.waitForRun((await engine.startRun("hop")).run_id);
    expect(hop.nodes[0]).toMatchObject({ state: "FAILED", reason: "non_retryable" });
    expect(hop.nodes[0]?.error?.message).toContain(
      "secret KEY may be sent only to 127.0.0.1 (its hosts), not to localhost",
    );
    expect(elsewhere.requests).toHaveLength(0);
  });

  it("hosts: an llm node's provider named by a template is checked at dispatch, the value found JSON-escaped in its body", async () => {
    const openai = await startOpenAIServer();
    cleanup.push(() => openai.close());
    openai.reply({ text: "done" });
    // A quote and a backslash: the request's JSON body holds the value escaped, not as it is.
    const value = `${secret()}"\\x`;
    const { engine } = await testEngine({
      secrets: { KEY: { value, hosts: ["127.0.0.1"] } },
      llm: {
        providers: {
          default: { base_url: openai.baseUrl },
          other: { base_url: openai.baseUrl.replace("127.0.0.1", "localhost") },
        },
      },
    });
    await engine.registerWorkflow({
      id: "ask",
      nodes: [
        {
          node_id: "ask",
          agent_type: "llm",
          payload: { model: "m", provider: "{{ input.provider }}", prompt: "Use {{ secrets.KEY }}" },
        },
      ],
    });
    const ok = await engine.waitForRun((await engine.startRun("ask", { input: { provider: "default" } })).run_id);
    expect(ok.status).toBe("SUCCEEDED");
    expect(openai.requestsTo("/v1/chat/completions")[0]?.body).toMatchObject({
      messages: [{ role: "user", content: `Use ${value}` }],
    });

    const away = await engine.waitForRun((await engine.startRun("ask", { input: { provider: "other" } })).run_id);
    expect(away.nodes[0]).toMatchObject({ state: "FAILED", reason: "non_retryable", attempt: 1 });
    expect(away.nodes[0]?.error?.message).toContain('provider "other" at http://localhost:');
    expect(away.nodes[0]?.error?.message).toContain(
      "secret KEY may be sent only to 127.0.0.1 (its hosts), not to localhost; add the host to the secret's hosts (the secrets option or SKEIN_SECRET_KEY_HOSTS)",
    );
    expect(openai.requestsTo("/v1/chat/completions")).toHaveLength(1);
  });

  it("workflows: registration refuses another workflow's read; the env gives hosts and workflows", async () => {
    const { secretsFromEnv } = await import("../../src/engine/attempts/secrets.js");
    expect(
      secretsFromEnv({
        SKEIN_SECRET_PAY: "pay-secret-1",
        SKEIN_SECRET_PAY_HOSTS: "api.pay.example, *.pay.example",
        SKEIN_SECRET_PAY_WORKFLOWS: "team-a-*",
        SKEIN_SECRET_OTHER_HOSTS: "alone",
      }),
    ).toEqual({
      PAY: { value: "pay-secret-1", hosts: ["api.pay.example", "*.pay.example"], workflows: ["team-a-*"] },
      OTHER_HOSTS: "alone",
    });
    const s = await server();
    const { engine } = await testEngine({ secrets: { PAY: { value: secret(), workflows: ["team-a-*"] } } });
    const wf = (id: string) => ({ id, nodes: [post(`${s.url}/p`, { k: "{{ secrets.PAY }}" })] });
    await engine.registerWorkflow(wf("team-a-payroll"));
    const e = await engine.registerWorkflow(wf("team-b-payroll")).catch((err: unknown) => err);
    expect((e as ValidationError).problems).toEqual([
      {
        path: "nodes[0].payload",
        message:
          "secret PAY may be used only by workflows team-a-* (its workflows), not by team-b-payroll; add the workflow to the secret's workflows (the secrets option or SKEIN_SECRET_PAY_WORKFLOWS)",
      },
    ]);
    const run = await engine.waitForRun((await engine.startRun("team-a-payroll")).run_id);
    expect(run.status).toBe("SUCCEEDED");
  });
});
