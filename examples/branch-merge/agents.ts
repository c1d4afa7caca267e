/** A classifier that routes questions to `answer` and everything else to `summarize`. */
import type { Task } from "../../src/index.js";

export default {
  classifier(task: Task) {
    const { text } = task.payload as { text: string };
    return { kind: text.trim().endsWith("?") ? "question" : "statement" };
  },
  writer(task: Task) {
    const { task: what, text } = task.payload as { task: string; text: string };
    return { [what]: `${what === "answer" ? "Answer to" : "Summary of"}: ${text}` };
  },
};
