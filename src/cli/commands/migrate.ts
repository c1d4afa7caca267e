/** `skein migrate <workflow_id> --to <version>`: move running runs of older versions to a newer one (DESIGN §16). */
import { type Command, InvalidArgumentError } from "commander";
import { getRunOrFail, withClient } from "../database.js";
import { dbOf, examples } from "../options.js";
import { printJson, println } from "../output.js";

interface MigrateOptions {
  to: number;
  from?: number;
  run?: string[];
  dryRun?: boolean;
  json?: boolean;
}

export function registerMigrate(program: Command): void {
  program
    .command("migrate")
    .summary("move running runs of older versions to a newer version")
    .description(
      "move running (RUNNING) top-level runs of older versions of a workflow to --to: a run moves when every node it visited is in the new version with the same agent_type, its finished nodes keep the edges they fired, and no attempt of it is running; nodes new in that version run when their turn comes. The others stay as they are, each printed with every reason. --dry-run moves nothing",
    )
    .argument("<workflow_id>", "the workflow whose runs move")
    .requiredOption("--to <version>", "the version to move runs to (newer than theirs)", version)
    .option("--from <version>", "only runs of this version (default: every older one)", version)
    .option(
      "--run <run_id>",
      "only this run (repeat for more; an abbreviated id as elsewhere)",
      (id: string, previous: string[] = []) => [...previous, id],
    )
    .option("--dry-run", "move nothing: print what would move and why the others would not")
    .option("--json", "print the answer as JSON: moved, incompatible (each with its reasons), dry_run")
    .addHelpText(
      "after",
      examples("skein migrate content-publish --to 3 --dry-run", "skein migrate content-publish --to 3 --from 2"),
    )
    .action(async (workflowId: string, options: MigrateOptions, command: Command) => {
      const db = dbOf(command);
      const answer = await withClient(db, async (client) => {
        const runIds: string[] = [];
        for (const given of options.run ?? []) runIds.push((await getRunOrFail(client, given, db)).run_id);
        return client.migrateRuns({
          workflow_id: workflowId,
          to_version: options.to,
          ...(options.from === undefined ? {} : { from_version: options.from }),
          ...(options.run === undefined ? {} : { run_ids: runIds }),
          dry_run: options.dryRun === true,
        });
      });
      if (options.json) return printJson(answer);
      const runs = (n: number) => `${n} run${n === 1 ? "" : "s"}`;
      const verb = answer.dry_run ? "would move" : "moved";
      println(`${verb} ${runs(answer.moved.length)} of ${workflowId} to version ${options.to}`);
      for (const m of answer.moved) println(`  ${m.run_id}  from version ${m.from_version}`);
      if (answer.incompatible.length === 0) return;
      const left = answer.incompatible.length;
      println(
        `${runs(left)} ${answer.dry_run ? "would stay" : left === 1 ? "stays" : "stay"} as ${left === 1 ? "it is" : "they are"}:`,
      );
      for (const r of answer.incompatible) {
        println(`  ${r.run_id}  version ${r.from_version}`);
        for (const reason of r.reasons) println(`    - ${reason}`);
      }
    });
}

function version(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError("expected a version number (1, 2, ...).");
  return n;
}
