/**
 * What becomes of an input the database refused: a statement error that trying again will not
 * change (a row it will not store). The dispatcher finds that input by applying the failed
 * batch again in halves (`Dispatcher.isolate`); only it fails, and everyone else's commit.
 */
import type { Input } from "./inputs.js";

/**
 * The input to apply instead of one the database refused, or null when there is none. An
 * attempt's result becomes a failure of that attempt, not retried (the same result would be
 * refused again), so the run moves on at once instead of at the attempt's timeout; a resolved
 * payload becomes a template error. An input with a caller is not replaced: the caller hears why.
 */
export function replacementOf(input: Input, error: unknown): Input | null {
  const why = `the database refused to store it (${error instanceof Error ? error.message : String(error)})`;
  switch (input.kind) {
    case "success":
    case "failure":
    case "fail_visit":
      return {
        kind: "failure",
        execution_id: input.execution_id,
        attempt: input.attempt,
        error: {
          message: `the result of attempt ${input.attempt} could not be recorded: ${why}`,
          reason: "invalid_output",
        },
        retryable: false,
      };
    case "payload":
      return {
        kind: "payload_error",
        key: input.key,
        error: { message: `the resolved payload could not be recorded: ${why}`, reason: "template_error" },
      };
    default:
      return null;
  }
}
