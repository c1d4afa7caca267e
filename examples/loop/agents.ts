/** The critic's score rises with each revision; the third critique passes. */
import type { Task } from "skein";

export default {
  writer(task: Task) {
    return { text: `draft v${task.node_id === "draft" ? 1 : task.visit + 1}` };
  },
  critic(task: Task) {
    // The first round reads the draft; later rounds read the revision whose edge activated them.
    const latest = (task.trigger?.output ?? task.deps.draft?.output) as { text: string };
    return { text: latest.text, score: Math.min(1, 0.3 + 0.2 * task.visit) };
  },
  publisher(task: Task) {
    return { published: (task.payload as { text: string }).text };
  },
};
