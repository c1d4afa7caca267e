/** A classifier that routes questions to `answer` and everything else to `summarize`. */
import { defineAgent } from "skein";

export default {
  classifier: defineAgent<{ text: string }, { kind: "question" | "statement" }>((task) => ({
    kind: task.payload.text.trim().endsWith("?") ? "question" : "statement",
  })),
  writer: defineAgent<{ task: string; text: string }>((task) => {
    const { task: what, text } = task.payload;
    return { [what]: `${what === "answer" ? "Answer to" : "Summary of"}: ${text}` };
  }),
};
