/**
 * Reading a run's kept progress (DESIGN §15): its `node.progress` events gathered per attempt,
 * text deltas joined, each attempt's stream marked superseded once the visit moved past it.
 */
import { isTextDelta } from "../core/progress.js";
import type { Json, RunEvent } from "../core/types.js";
import { NotFoundError } from "../errors.js";
import type { Store } from "../store/store.js";
import { refuseNul } from "./identifiers.js";

/** One attempt's kept progress. */
export interface ProgressStream {
  node_id: string;
  visit: number;
  attempt: number;
  /** Its text deltas (`{ delta }` values) joined, in order; "" when it sent none. */
  text: string;
  /** The last value it sent that is not a text delta, else null. */
  last: Json | null;
  /** How many `node.progress` events it kept. */
  events: number;
  /** The seq of its last event: a stream resumed after it (`cursor`) has all of it. */
  last_seq: number;
  /** The attempt was retried (or a later one started): what it streamed is not the node's output. */
  superseded: boolean;
}

/** Events read per page. */
const PAGE = 1000;

/**
 * Each attempt's kept progress in a run, in the order the streams began.
 * @throws NotFoundError for an unknown run
 */
export async function listProgress(store: Store, runId: string): Promise<ProgressStream[]> {
  refuseNul({ run_id: runId });
  if (!(await store.getRun(runId))) {
    throw new NotFoundError(`run ${runId} does not exist; check the run id and the database`);
  }
  const streams = new Map<string, ProgressStream>();
  /** By node and visit: the latest attempt seen started, and the attempts that ended retrying. */
  const latest = new Map<string, number>();
  const retried = new Set<string>();
  for (let after = 0; ; ) {
    const page = await store.listEvents(runId, { afterSeq: after, limit: PAGE });
    for (const e of page) add(e, streams, latest, retried);
    if (page.length < PAGE) break;
    after = (page.at(-1) as RunEvent).seq;
  }
  for (const s of streams.values()) {
    const visit = `${s.node_id}:${s.visit}`;
    s.superseded = retried.has(`${visit}:${s.attempt}`) || (latest.get(visit) ?? 0) > s.attempt;
  }
  return [...streams.values()];
}

function add(e: RunEvent, streams: Map<string, ProgressStream>, latest: Map<string, number>, retried: Set<string>) {
  if (e.node_id === null || e.visit === null) return;
  const attempt = e.data.attempt;
  if (typeof attempt !== "number") return;
  const visit = `${e.node_id}:${e.visit}`;
  if (e.type === "node.started") latest.set(visit, Math.max(latest.get(visit) ?? 0, attempt));
  if (e.type === "node.retrying" || e.type === "node.interrupted") retried.add(`${visit}:${attempt}`);
  if (e.type !== "node.progress") return;
  const key = `${visit}:${attempt}`;
  let s = streams.get(key);
  if (!s) {
    s = {
      node_id: e.node_id,
      visit: e.visit,
      attempt,
      text: "",
      last: null,
      events: 0,
      last_seq: e.seq,
      superseded: false,
    };
    streams.set(key, s);
  }
  const value = e.data.progress as Json;
  if (isTextDelta(value)) s.text += value.delta;
  else s.last = value;
  s.events += 1;
  s.last_seq = e.seq;
}
