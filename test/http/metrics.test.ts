/**
 * GET /metrics (DESIGN §9): the engine's OpenTelemetry instruments scraped as Prometheus text
 * after real runs, on a real SQLite file and a fresh PostgreSQL schema. The text is parsed by a
 * strict parser of the exposition format below (a line it cannot read fails the test).
 */
import { describe, expect, it, vi } from "vitest";
import { prometheusMetrics } from "../../src/http/server.js";
import { nextEvent, tempDb } from "../helpers.js";
import { bearer, TOKEN_LIST, TOKENS, testApi, WORKFLOWS } from "./helpers.js";

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

interface Scrape {
  types: Map<string, string>;
  samples: Sample[];
}

const NAME = "[a-zA-Z_:][a-zA-Z0-9_:]*";
const SAMPLE = new RegExp(`^(${NAME})(?:\\{(.*)\\})? (\\S+)$`);
const LABEL = new RegExp(`^(${NAME})="((?:[^"\\\\]|\\\\.)*)"(,|$)`);

/** The Prometheus text exposition format (0.0.4): comments, TYPE lines and samples; throws on anything else. */
function parsePrometheus(text: string): Scrape {
  const types = new Map<string, string>();
  const samples: Sample[] = [];
  for (const line of text.split("\n")) {
    if (line === "") continue;
    const type = /^# TYPE (\S+) (counter|gauge|histogram|summary|untyped)$/.exec(line);
    if (type) {
      types.set(type[1] as string, type[2] as string);
      continue;
    }
    if (/^# (HELP|UNIT) \S+ .*$/.test(line)) continue;
    const m = SAMPLE.exec(line);
    if (!m) throw new Error(`not a Prometheus text line: ${JSON.stringify(line)}`);
    const labels: Record<string, string> = {};
    let rest = m[2] ?? "";
    while (rest !== "") {
      const l = LABEL.exec(rest);
      if (!l) throw new Error(`bad labels in ${JSON.stringify(line)}`);
      labels[l[1] as string] = (l[2] as string).replace(/\\(.)/g, (_, c: string) => (c === "n" ? "\n" : c));
      rest = rest.slice(l[0].length);
    }
    const value = m[3] === "+Inf" ? Number.POSITIVE_INFINITY : Number(m[3]);
    if (Number.isNaN(value)) throw new Error(`bad value in ${JSON.stringify(line)}`);
    samples.push({ name: m[1] as string, labels, value });
  }
  return { types, samples };
}

/** The value of the one sample of `name` whose labels are exactly `labels`. */
function value(scrape: Scrape, name: string, labels: Record<string, string> = {}): number | undefined {
  const found = scrape.samples.filter(
    (s) =>
      s.name === name &&
      JSON.stringify(Object.entries(s.labels).sort()) === JSON.stringify(Object.entries(labels).sort()),
  );
  expect(found.length, `${name}${JSON.stringify(labels)} appears at most once`).toBeLessThanOrEqual(1);
  return found[0]?.value;
}

/** A workflow whose only node's agent type nobody runs: its visit stays ready, unclaimed. */
const UNHANDLED = { id: "unhandled", nodes: [{ node_id: "a", agent_type: "nobody" }] };

for (const kind of ["sqlite", "postgres"] as const) {
  describe(`GET /metrics (${kind})`, () => {
    async function api() {
      const metrics = prometheusMetrics();
      const t = await testApi({
        engine: { database: tempDb(kind), meterProvider: metrics.meterProvider },
        server: { metrics: metrics.reader },
      });
      const scrape = async (token: string = TOKENS.admin) => {
        const res = await t.app.inject({ url: "/metrics", headers: bearer(token) });
        expect(res.statusCode, res.body).toBe(200);
        expect(res.headers["content-type"]).toBe("text/plain; version=0.0.4; charset=utf-8");
        return parsePrometheus(res.body);
      };
      return { ...t, scrape };
    }

    it("counts runs and attempts by workflow, status, agent type and outcome, with no run id in a label", async () => {
      const { engine, scrape } = await api();
      for (const w of [WORKFLOWS.simple, WORKFLOWS.failing]) await engine.registerWorkflow(w);
      const ok = await engine.startRun("simple");
      const bad = await engine.startRun("failing");
      await engine.waitForRun(ok.run_id);
      await engine.waitForRun(bad.run_id);

      const s = await scrape();
      expect(s.types.get("skein_runs_started_total")).toBe("counter");
      expect(s.types.get("skein_runs_ended_total")).toBe("counter");
      expect(s.types.get("skein_attempts_total")).toBe("counter");
      expect(s.types.get("skein_attempt_duration_seconds")).toBe("histogram");
      expect(s.types.get("skein_transaction_duration_seconds")).toBe("histogram");
      expect(value(s, "skein_runs_started_total", { workflow: "simple" })).toBe(1);
      expect(value(s, "skein_runs_started_total", { workflow: "failing" })).toBe(1);
      expect(value(s, "skein_runs_ended_total", { workflow: "simple", status: "succeeded" })).toBe(1);
      expect(value(s, "skein_runs_ended_total", { workflow: "failing", status: "failed" })).toBe(1);
      expect(value(s, "skein_attempts_total", { agent_type: "writer", outcome: "succeeded" })).toBe(2);
      expect(value(s, "skein_attempts_total", { agent_type: "broken", outcome: "failed" })).toBe(1);
      const writer = { agent_type: "writer", outcome: "succeeded" };
      expect(value(s, "skein_attempt_duration_seconds_count", writer)).toBe(2);
      expect(value(s, "skein_attempt_duration_seconds_bucket", { ...writer, le: "+Inf" })).toBe(2);
      expect(value(s, "skein_transaction_duration_seconds_count")).toBeGreaterThanOrEqual(2);
      // The writer's queue is empty (an agent type this engine runs is shown at 0); nothing waits.
      expect(value(s, "skein_ready_visits", { agent_type: "writer" })).toBe(0);
      expect(value(s, "skein_pending_reviews")).toBe(0);
      expect(value(s, "skein_pending_waits")).toBe(0);
      expect(value(s, "skein_engine_heartbeat_age_seconds")).toBeGreaterThanOrEqual(0);

      const runIds = [ok.run_id, bad.run_id];
      for (const sample of s.samples) {
        for (const v of Object.values(sample.labels)) {
          for (const id of runIds) expect(v, `${sample.name} ${JSON.stringify(sample.labels)}`).not.toContain(id);
        }
      }
    });

    it("counts each attempt of a retried node by its own outcome, timed from its own claim", async () => {
      let calls = 0;
      const metrics = prometheusMetrics();
      const t = await testApi({
        engine: {
          database: tempDb(kind),
          meterProvider: metrics.meterProvider,
          agents: {
            flaky: () => {
              calls += 1;
              if (calls === 1) throw new Error("the first try fails");
              return { ok: true };
            },
          },
        },
        server: { metrics: metrics.reader },
      });
      await t.engine.registerWorkflow({
        id: "flaky",
        nodes: [{ node_id: "a", agent_type: "flaky", retry_count: 1, retry_interval: 0 }],
      });
      const run = await t.engine.startRun("flaky");
      expect((await t.engine.waitForRun(run.run_id)).status).toBe("SUCCEEDED");

      const res = await t.app.inject({ url: "/metrics", headers: bearer(TOKENS.admin) });
      const s = parsePrometheus(res.body);
      expect(value(s, "skein_attempts_total", { agent_type: "flaky", outcome: "retrying" })).toBe(1);
      expect(value(s, "skein_attempts_total", { agent_type: "flaky", outcome: "succeeded" })).toBe(1);
      expect(value(s, "skein_attempt_duration_seconds_count", { agent_type: "flaky", outcome: "retrying" })).toBe(1);
      expect(value(s, "skein_runs_ended_total", { workflow: "flaky", status: "succeeded" })).toBe(1);
    });

    it("shows a visit nobody claims as queue depth 1, with its age, and a review waiting", async () => {
      const { engine, clock, scrape } = await api();
      for (const w of [UNHANDLED, WORKFLOWS.review]) await engine.registerWorkflow(w);
      const stuck = await engine.startRun("unhandled");
      const reviewed = nextEvent(engine, (e) => e.type === "review.requested");
      await engine.startRun("review");
      await reviewed;
      // The payload resolves after the visit is ready (a transaction of its own): only then is it claimable.
      await vi.waitFor(async () => {
        const run = await engine.getRun(stuck.run_id);
        expect(run.nodes.find((n) => n.node_id === "a")?.payload).not.toBeNull();
      });
      await clock.advance(5000);

      const s = await scrape();
      expect(s.types.get("skein_ready_visits")).toBe("gauge");
      expect(value(s, "skein_ready_visits", { agent_type: "nobody" })).toBe(1);
      expect(value(s, "skein_oldest_ready_seconds", { agent_type: "nobody" })).toBeGreaterThanOrEqual(5);
      expect(value(s, "skein_pending_reviews")).toBe(1);
    });

    it("answers admin and metrics tokens; refuses other roles, scoped tokens and no token", async () => {
      const metricsToken = "metrics-0123456789abcdef";
      const scopedToken = "scoped-admin-0123456789ab";
      const metrics = prometheusMetrics();
      const t = await testApi({
        engine: { database: tempDb(kind), meterProvider: metrics.meterProvider },
        server: {
          metrics: metrics.reader,
          tokens: [
            ...TOKEN_LIST,
            { token: metricsToken, role: "metrics", name: "prometheus" },
            { token: scopedToken, role: "admin", name: "team", workflows: ["simple"] },
          ],
        },
      });
      const status = async (headers: Record<string, string>) =>
        (await t.app.inject({ url: "/metrics", headers })).statusCode;
      expect(await status(bearer(TOKENS.admin))).toBe(200);
      expect(await status(bearer(metricsToken))).toBe(200);
      expect(await status(bearer(TOKENS.alice))).toBe(403);
      expect(await status(bearer(TOKENS.agent))).toBe(403);
      expect(await status(bearer(scopedToken))).toBe(403);
      expect(await status({})).toBe(401);
      // A metrics token reads nothing else.
      expect((await t.app.inject({ url: "/v1/runs", headers: bearer(metricsToken) })).statusCode).toBe(403);
    });
  });
}

describe("GET /metrics without a metrics reader", () => {
  it("is not there (404), and the OpenAPI document of /v1 routes never lists it", async () => {
    const metrics = prometheusMetrics();
    const { app } = await testApi({ server: { metrics: metrics.reader } });
    const doc = (await app.inject({ url: "/v1/openapi.json" })).json() as { paths: Record<string, unknown> };
    expect(Object.keys(doc.paths)).not.toContain("/metrics");
    const bare = await testApi();
    const res = await bare.app.inject({ url: "/metrics", headers: bearer(TOKENS.admin) });
    expect(res.statusCode).toBe(404);
  });
});

describe("metrics tokens", () => {
  it("refuses a metrics token scoped to workflows or agent types, with the path", async () => {
    const { checkTokens } = await import("../../src/http/auth.js");
    expect(() =>
      checkTokens([{ token: "metrics-0123456789abcdef", role: "metrics", name: "p", workflows: ["simple"] }]),
    ).toThrow(/workflows: a metrics token reads every workflow's metrics/);
    expect(() =>
      checkTokens([{ token: "metrics-0123456789abcdef", role: "metrics", name: "p", agent_types: ["writer"] }]),
    ).toThrow(/agent_types: a metrics token reads every workflow's metrics/);
  });
});
