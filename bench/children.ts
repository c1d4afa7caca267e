/**
 * Engine processes started by a bench measurement: a TypeScript file run through tsx, commands
 * sent as JSON lines on its stdin, reports read as JSON lines from its stdout. Every child is
 * tracked until it has exited, so `killChildren` can end them all when a measurement fails or
 * is abandoned; a child whose stdin closes (the bench died) exits by itself.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { within } from "./lib.js";

export type Message = { type: string; [key: string]: unknown };

const live = new Set<BenchChild>();

export class BenchChild {
  readonly proc: ChildProcess;
  readonly exited: Promise<void>;
  private readonly inbox: Message[] = [];
  private readonly waiting: { type: string; resolve(m: Message): void; reject(e: Error): void }[] = [];
  private stderrTail = "";
  private gone = false;

  /** Starts `node --import tsx <script> <args>` from the repository's root. */
  constructor(
    readonly name: string,
    script: string,
    args: string[],
  ) {
    this.proc = spawn(process.execPath, ["--import", "tsx", script, ...args], {
      stdio: ["pipe", "pipe", "pipe"],
      env: { ...process.env, SKEIN_LOG_LEVEL: process.env.SKEIN_LOG_LEVEL ?? "warn" },
    });
    live.add(this);
    this.exited = new Promise((resolve) =>
      this.proc.once("exit", (code, signal) => {
        this.gone = true;
        live.delete(this);
        const why = new Error(
          `${this.name} exited (${code ?? signal})${this.stderrTail ? `: ${this.stderrTail}` : ""}`,
        );
        for (const w of this.waiting.splice(0)) w.reject(why);
        resolve();
      }),
    );
    // Keep the end of stderr for error messages, and pass it on: an engine's warnings matter.
    this.proc.stderr?.setEncoding("utf8");
    this.proc.stderr?.on("data", (chunk: string) => {
      process.stderr.write(chunk);
      this.stderrTail = (this.stderrTail + chunk).slice(-2000);
    });
    createInterface({ input: this.proc.stdout as NodeJS.ReadableStream }).on("line", (line) => {
      let message: Message;
      try {
        message = JSON.parse(line) as Message;
      } catch {
        process.stderr.write(`[${this.name}] ${line}\n`);
        return;
      }
      const i = this.waiting.findIndex((w) => w.type === message.type);
      if (i >= 0) this.waiting.splice(i, 1)[0]?.resolve(message);
      else this.inbox.push(message);
    });
    // Writing to a child that just died must not crash the bench: the exit is reported instead.
    this.proc.stdin?.on("error", () => {});
  }

  send(command: object): void {
    this.proc.stdin?.write(`${JSON.stringify(command)}\n`);
  }

  /** The next message of this type (printed already or later), in order; bounded by `ms`. */
  take<T extends Message = Message>(type: string, ms: number): Promise<T> {
    const i = this.inbox.findIndex((m) => m.type === type);
    if (i >= 0) return Promise.resolve(this.inbox.splice(i, 1)[0] as T);
    if (this.gone) return Promise.reject(new Error(`${this.name} has exited; no ${type} will come`));
    const message = new Promise<Message>((resolve, reject) => this.waiting.push({ type, resolve, reject }));
    return within(message, ms, `${this.name}: ${type}`) as Promise<T>;
  }

  /** Asks the child to close its engine and exit (its stdin closes); SIGKILL if it has not within `ms`. */
  async stop(ms = 15_000): Promise<void> {
    if (this.gone) return;
    this.proc.stdin?.end();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.exited, new Promise((resolve) => (timer = setTimeout(resolve, ms)))]);
    clearTimeout(timer);
    await this.kill();
  }

  /** SIGKILL, and wait until the process is reaped. */
  async kill(): Promise<void> {
    if (this.gone) return;
    this.proc.kill("SIGKILL");
    await this.exited;
  }
}

/** Kills every child still running: the clean-up after a failed or abandoned measurement. */
export async function killChildren(): Promise<number> {
  const children = [...live];
  await Promise.all(children.map((c) => c.kill()));
  return children.length;
}

/** The child's side: JSON lines to the parent, commands from it, and exit when the parent goes away. */
export function report(message: Message): void {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

/**
 * Calls `onCommand` for each JSON line on stdin, one at a time, and `onEnd` once stdin closes (the
 * parent asked this child to stop, or died).
 */
export function serveCommands(
  onCommand: (command: Record<string, unknown>) => Promise<void>,
  onEnd: () => Promise<void>,
): void {
  let queue = Promise.resolve();
  const lines = createInterface({ input: process.stdin });
  const fail = (e: unknown) => {
    process.stderr.write(`${(e as Error).stack ?? String(e)}\n`);
    process.exit(1);
  };
  lines.on("line", (line) => {
    queue = queue.then(() => onCommand(JSON.parse(line) as Record<string, unknown>)).catch(fail);
  });
  lines.on("close", () => {
    queue = queue.then(onEnd).catch(fail);
  });
}
