/** `skein reviews`: the human_review nodes waiting for a decision, oldest first. */
import type { Command } from "commander";
import type { Json, PendingReview } from "../../index.js";
import { withClient } from "../database.js";
import { dbOf, examples } from "../options.js";
import { formatMs, oneLine, printJson, println, table } from "../output.js";

export function registerReviews(program: Command): void {
  program
    .command("reviews")
    .summary("list the reviews waiting for a decision")
    .description(
      "list the human_review nodes waiting for a decision, oldest first: run, node, title, assignees and the time left before the review times out (then it counts as rejected)",
    )
    .option("--json", "print the pending reviews as a JSON array (with instructions, data and execution_id)")
    .addHelpText("after", examples("skein reviews", "skein reviews --json | jq '.[0].data'"))
    .action(async (options: { json?: boolean }, command: Command) => {
      const reviews = await withClient(dbOf(command), (client) => client.listReviews({ status: "pending" }));
      if (options.json) return printJson(reviews);
      if (reviews.length === 0) return println("no reviews waiting");
      const now = Date.now();
      println(
        table(
          ["run_id", "node_id", "title", "assignees", "time left"],
          reviews.map((r) => [r.run_id, r.node_id, oneLine(text(r.title), 60), assigneesOf(r), timeLeft(r, now)]),
        ),
      );
    });
}

function text(value: Json | null): string {
  if (value === null) return "-";
  return typeof value === "string" ? value : JSON.stringify(value);
}

function assigneesOf(r: PendingReview): string {
  if (Array.isArray(r.assignees)) return r.assignees.map((a) => text(a)).join(", ") || "nobody";
  return r.assignees === null ? "anyone" : text(r.assignees);
}

/** `3 h 59 min`; `overdue` once the deadline passed (the engine's next sweep times it out). */
function timeLeft(r: PendingReview, now: number): string {
  if (r.deadline_at === null) return "-";
  return r.deadline_at <= now ? "overdue" : formatMs(r.deadline_at - now);
}
