/**
 * Abbreviated run ids (`skein status 7f3a9c`): a run id the CLI takes may be the whole id, or a
 * unique part of it of at least 4 characters, from its start or from its end. Run ids are
 * UUIDv7: the head is the start time, so runs started close together share it, and the admin
 * page and the CLI's tables show the tail (the random part), which is what people copy.
 */
import type { Engine, Run, RunWithNodes } from "../index.js";
import { CliError } from "./output.js";

export const MIN_ABBREVIATION = 4;
/** Matches listed for an ambiguous abbreviation. */
const SHOWN = 10;

/**
 * The run a whole or abbreviated id names, with its nodes. The whole id is read at once (no
 * scan); otherwise the runs whose id starts or ends with it. @throws CliError (exit 2) for no
 * run, or for an abbreviation that is too short or names several runs (listing them)
 */
export async function resolveRun(client: Engine, given: string, db: string): Promise<RunWithNodes> {
  try {
    return await client.getRun(given);
  } catch (e) {
    if ((e as { code?: unknown }).code !== "not_found") throw e;
  }
  // Ids are lowercase hex; one copied from elsewhere may be uppercase.
  const part = /^[0-9A-Fa-f-]+$/.test(given) ? given.toLowerCase() : given;
  if (part.length < MIN_ABBREVIATION) {
    throw new CliError(
      `run ${given} does not exist in ${db} (an abbreviated run id needs at least ${MIN_ABBREVIATION} characters of its start or its end); skein list shows the runs`,
    );
  }
  const { prefix, suffix } = await client.findRunsByIdPart(part, SHOWN + 1);
  const matches = new Map<string, Run>();
  for (const run of [...prefix, ...suffix]) matches.set(run.run_id, run);
  const [only, ...others] = matches.values();
  if (only === undefined) {
    throw new CliError(
      `run ${given} does not exist in ${db} (no run id starts or ends with it either); skein list shows the runs`,
    );
  }
  if (others.length > 0) throw new CliError(ambiguous(given, [...matches.values()]));
  return client.getRun(only.run_id);
}

function ambiguous(given: string, runs: Run[]): string {
  const shown = runs
    .sort((a, b) => a.created_at - b.created_at || (a.run_id < b.run_id ? -1 : 1))
    .slice(0, SHOWN)
    .map((r) => `  ${r.run_id}  ${r.workflow_id}  started ${new Date(r.created_at).toISOString()}`);
  const count = runs.length > SHOWN ? `more than ${SHOWN} runs, among them` : `${runs.length} runs`;
  return `run id ${given} is ambiguous: it names ${count}; type more of it:\n${shown.join("\n")}`;
}
