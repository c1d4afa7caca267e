/** `skein prune --older-than 30d`: delete finished runs past a retention period (DESIGN §8). */
import { type Command, InvalidArgumentError } from "commander";
import type { PrunedStatus } from "../../index.js";
import { withClient } from "../database.js";
import { dbOf, examples } from "../options.js";
import { printJson, println } from "../output.js";

interface PruneOptions {
  olderThan: string;
  status?: PrunedStatus[];
  dryRun?: boolean;
  json?: boolean;
}

const STATUS_OF: Record<string, PrunedStatus> = { succeeded: "SUCCEEDED", failed: "FAILED", cancelled: "CANCELLED" };

export function registerPrune(program: Command): void {
  program
    .command("prune")
    .summary("delete finished runs older than a duration")
    .description(
      "delete finished runs (SUCCEEDED, FAILED, CANCELLED) that ended longer ago than --older-than, with their nodes, events, compensations, events received, map items and child runs, about 500 runs per transaction (an engine may keep running). Runs in progress, and runs whose child runs are, are kept. The idempotency keys of deleted runs are forgotten: a start with the same key makes a new run",
    )
    .requiredOption("--older-than <duration>", 'age of the runs to delete: seconds, or "90s", "45m", "12h", "30d"')
    .option("--status <list>", "only these statuses, comma-separated (default: succeeded,failed,cancelled)", statuses)
    .option("--dry-run", "say how many runs would be deleted, deleting nothing")
    .option("--json", "print { pruned } or { would_prune } as JSON")
    .addHelpText(
      "after",
      examples("skein prune --older-than 30d", "skein prune --older-than 90d --status failed,cancelled --dry-run"),
    )
    .action(async (options: PruneOptions, command: Command) => {
      const dryRun = options.dryRun === true;
      const count = await withClient(dbOf(command), (client) =>
        client.pruneRuns({
          olderThan: /^\d+(\.\d+)?$/.test(options.olderThan) ? Number(options.olderThan) : options.olderThan,
          ...(options.status ? { statuses: options.status } : {}),
          dryRun,
        }),
      );
      if (options.json) return printJson(dryRun ? { would_prune: count } : { pruned: count });
      const runs = count === 1 ? "1 run" : `${count} runs`;
      println(dryRun ? `${runs} would be deleted (dry run: nothing deleted)` : `deleted ${runs}`);
    });
}

function statuses(value: string): PrunedStatus[] {
  const names = value.split(",").map((s) => s.trim().toLowerCase());
  const unknown = names.filter((s) => !(s in STATUS_OF));
  if (unknown.length > 0 || names.length === 0) {
    throw new InvalidArgumentError(
      `"${unknown.join(",")}" is not a status runs are pruned in: use succeeded, failed or cancelled.`,
    );
  }
  return [...new Set(names.map((s) => STATUS_OF[s] as PrunedStatus))];
}
