/** `skein send <run_id> <name>`: send an event to a run (DESIGN §11.2); says where it went. */
import type { Command } from "commander";
import type { Json } from "../../core/types.js";
import { getRunOrFail, withClient } from "../database.js";
import { parseJsonOption } from "../input.js";
import { dbOf, examples, RUN_ID_HELP } from "../options.js";
import { printJson, println } from "../output.js";

interface SendOptions {
  payload?: string;
  idempotencyKey?: string;
  json?: boolean;
}

export function registerSend(program: Command): void {
  program
    .command("send")
    .summary("send an event to a run")
    .description(
      "send an event to a run: its oldest wait_event node waiting for that name receives it (its payload becomes the node's output); when none waits, the run's inbox keeps it for the next one. A finished run is refused (exit 2)",
    )
    .argument("<run_id>", RUN_ID_HELP)
    .argument("<name>", "the event's name (a wait_event node's payload.event)")
    .option("--payload <json|@file>", "the event's payload: JSON text, or @path to a JSON file (default null)")
    .option("--idempotency-key <key>", "the same key sent again is delivered once")
    .option("--json", "print the answer as JSON")
    .addHelpText(
      "after",
      examples(`skein send 01939a6e-6c1e-7b52-9f3a-2d1c4b5a6e7f payment.received --payload '{"amount":12}'`),
    )
    .action(async (given: string, name: string, options: SendOptions, command: Command) => {
      const payload = (options.payload === undefined ? null : parseJsonOption(options.payload, "--payload")) as Json;
      const db = dbOf(command);
      const answer = await withClient(db, async (client) => {
        const { run_id } = await getRunOrFail(client, given, db);
        return client.sendEvent(run_id, name, payload, {
          ...(options.idempotencyKey === undefined ? {} : { idempotency_key: options.idempotencyKey }),
        });
      });
      if (options.json) return printJson(answer);
      const where = answer.delivered_to
        ? `delivered to ${answer.delivered_to.node_id} (visit ${answer.delivered_to.visit})`
        : "kept in the run's inbox: the next wait_event for it takes it";
      println(`event ${name} ${answer.duplicate ? "was sent before with this idempotency key: " : ""}${where}`);
    });
}
