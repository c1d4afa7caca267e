/**
 * Running the BUILT command line (`node dist/cli/main.js`) as a child process, each test in its
 * own temp directory with its own SQLite file. `npm test` builds first; when running vitest
 * alone, run `npm run build` first (checked in beforeAll). Waits are on output lines, bounded.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeAll } from "vitest";
import { onPostgres, tempDb } from "../helpers.js";

export const ROOT = fileURLToPath(new URL("../../", import.meta.url));
export const CLI = join(ROOT, "dist", "cli", "main.js");
/** The test agents module (TypeScript, loaded by the CLI through tsx). */
export const AGENTS = join(ROOT, "test", "fixtures", "cli-agents.ts");
/** The order-approval example: its workflow file and agents module. */
export const ORDER_APPROVAL = {
  workflow: join(ROOT, "examples", "order-approval", "workflow.json"),
  agents: join(ROOT, "examples", "order-approval", "agents.ts"),
};
/** Bound on one CLI command (a cold start that loads tsx takes a second or two on a loaded machine). */
const COMMAND_MS = 25_000;

/**
 * The bound of a test that runs `commands` CLI processes (one after another, or at once on a
 * machine with one free core): each is bounded by COMMAND_MS, so the test's bound is their sum
 * and a slow command fails with its own message, not the test's timeout. vitest's default 30 s
 * held a dozen cold starts only on an idle machine (a 2.5x slower one took over 3 s each).
 */
export function commandsMs(commands: number): number {
  return commands * COMMAND_MS;
}

/** Fails the file early, with what to do, when the CLI is not built. */
export function requireBuiltCli(): void {
  beforeAll(() => {
    if (!existsSync(CLI)) throw new Error(`${CLI} is missing: run \`npm run build\` first (npm test does)`);
  });
}

const dirs: string[] = [];
const children = new Set<ChildProcess>();

afterEach(() => {
  for (const child of children) child.kill("SIGKILL");
  children.clear();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/**
 * A temp directory with a database URL (a SQLite file there, or a fresh PostgreSQL schema when
 * the suite runs on PostgreSQL) and a helper to write JSON files into it.
 */
export function workspace(): { dir: string; db: string; file(name: string, value: unknown): string } {
  const dir = mkdtempSync(join(tmpdir(), "skein-cli-"));
  dirs.push(dir);
  return {
    dir,
    db: onPostgres ? tempDb() : `sqlite:${join(dir, "x.db")}`,
    file(name, value) {
      const path = join(dir, name);
      writeFileSync(path, typeof value === "string" ? value : JSON.stringify(value, null, 2));
      return path;
    },
  };
}

export interface Result {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

function env(): NodeJS.ProcessEnv {
  const e: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: "1" };
  delete e.SKEIN_DB;
  delete e.SKEIN_LOG_LEVEL;
  return e;
}

/** A running `skein` process: its output so far, line waits, and its exit. */
export class Skein {
  readonly proc: ChildProcess;
  stdout = "";
  stderr = "";
  readonly exited: Promise<Result>;
  private readonly waiters = new Set<() => void>();

  /** `extraEnv` adds to the environment (which never inherits SKEIN_DB or SKEIN_LOG_LEVEL). */
  constructor(args: string[], cwd: string, extraEnv: NodeJS.ProcessEnv = {}) {
    this.proc = spawn(process.execPath, [CLI, ...args], {
      cwd,
      env: { ...env(), ...extraEnv },
      stdio: ["ignore", "pipe", "pipe"],
    });
    children.add(this.proc);
    this.proc.stdout?.setEncoding("utf8").on("data", (chunk: string) => {
      this.stdout += chunk;
      this.notify();
    });
    this.proc.stderr?.setEncoding("utf8").on("data", (chunk: string) => {
      this.stderr += chunk;
      this.notify();
    });
    this.exited = new Promise((resolve) => {
      this.proc.once("close", (code, signal) => {
        children.delete(this.proc);
        this.notify();
        resolve({ code, signal, stdout: this.stdout, stderr: this.stderr });
      });
    });
  }

  /** Resolves with the first match of `pattern` in stdout (or stderr) now or later; rejects on exit or after `ms`. */
  waitFor(pattern: RegExp, ms = COMMAND_MS, from: "stdout" | "stderr" = "stdout"): Promise<RegExpMatchArray> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const m = this[from].match(pattern);
        if (m) return done(() => resolve(m));
        if (this.proc.exitCode !== null || this.proc.signalCode !== null) {
          done(() => reject(new Error(`skein exited before printing ${pattern}:\n${this.stdout}\n${this.stderr}`)));
        }
      };
      const timer = setTimeout(
        () => done(() => reject(new Error(`no ${pattern} within ${ms} ms:\n${this.stdout}\n${this.stderr}`))),
        ms,
      );
      const done = (settle: () => void) => {
        clearTimeout(timer);
        this.waiters.delete(check);
        settle();
      };
      this.waiters.add(check);
      check();
    });
  }

  /** The exit, bounded: a hung command is killed and fails the test. */
  async result(ms = COMMAND_MS): Promise<Result> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        this.proc.kill("SIGKILL");
        reject(new Error(`skein did not exit within ${ms} ms:\n${this.stdout}\n${this.stderr}`));
      }, ms);
    });
    try {
      return await Promise.race([this.exited, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  private notify(): void {
    for (const w of [...this.waiters]) w();
  }
}

/** Runs `skein <args>` in `cwd` to its end. */
export function skein(args: string[], cwd: string): Promise<Result> {
  return new Skein(args, cwd).result();
}

/**
 * Between two probes of `until`, ms. A probe is a CLI process (about 0.3 s of CPU to start), and
 * what it waits for is mostly an engine's next sweep (up to 1 s): probing back to back spawned
 * three or four processes per wait, and three test files waiting at once kept both cores busy
 * starting them, slowing the engines they waited for (the CLI tests took 43 % of the suite).
 */
const PROBE_GAP_MS = 200;

/**
 * Runs `probe` (typically a CLI command) until `check` accepts its result, and returns that
 * result; fails after `ms` with `what` and the last result. Not a sleep standing in for the
 * event: every probe checks it, and the gap only spaces the probes.
 */
export async function until<T>(
  what: string,
  probe: () => Promise<T>,
  check: (value: T) => boolean,
  ms = COMMAND_MS,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (check(value)) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms; last: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, PROBE_GAP_MS));
  }
}

/** Parses stdout as one JSON value, with the output in the error when it is not JSON. */
/** A run as `skein status --json` prints it (the fields the tests read). */
export interface RunJson {
  run_id: string;
  workflow_id: string;
  status: string;
  input: unknown;
  nodes: { node_id: string; state: string }[];
}

/** Output of one JSON object a line (`skein events --json`), parsed. */
export function lines(r: Result): unknown[] {
  return r.stdout
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l) as unknown);
}

export function json<T = unknown>(r: Result): T {
  try {
    return JSON.parse(r.stdout) as T;
  } catch {
    throw new Error(`stdout is not JSON (exit ${r.code}):\n${r.stdout}\nstderr:\n${r.stderr}`);
  }
}

/** Small workflows of the CLI tests (agent types of test/fixtures/cli-agents.ts). */
export const WORKFLOWS = {
  /** a -> (b flaky, c) -> d aggregator: succeeds after one retry of b. */
  small: {
    id: "small",
    defaults: { retry_interval: 0.05, timeout: 30 },
    nodes: [
      { node_id: "a", agent_type: "echo" },
      { node_id: "b", agent_type: "flaky", depends_on: ["a"] },
      { node_id: "c", agent_type: "slow", payload: { ms: 50 }, depends_on: ["a"] },
      { node_id: "d", agent_type: "aggregator", depends_on: ["b", "c"] },
    ],
  },
  /** b fails for good: the run FAILS. */
  failing: {
    id: "failing",
    defaults: { timeout: 30 },
    nodes: [
      { node_id: "a", agent_type: "echo" },
      { node_id: "b", agent_type: "broken", payload: { message: "the upstream API said no" }, depends_on: ["a"] },
      { node_id: "c", agent_type: "echo", depends_on: ["b"] },
    ],
  },
  /** b takes long enough to be interrupted mid-run. */
  long: {
    id: "long",
    defaults: { retry_count: 0, timeout: 60 },
    nodes: [
      { node_id: "a", agent_type: "echo" },
      { node_id: "b", agent_type: "slow", payload: { ms: 2500 }, depends_on: ["a"] },
      { node_id: "c", agent_type: "echo", depends_on: ["b"] },
    ],
  },
  /** Needs a {topic} input. */
  withInput: {
    id: "with-input",
    input_schema: { type: "object", properties: { topic: { type: "string" } }, required: ["topic"] },
    nodes: [{ node_id: "a", agent_type: "echo" }],
  },
};
