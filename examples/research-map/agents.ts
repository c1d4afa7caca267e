/**
 * Deterministic agents of the research-map example (no network, no randomness). The planner
 * splits a topic into five sub-questions; the `answer` map runs one `researcher` per question,
 * four at a time, each item a child run of its own with the map node's retry settings (the
 * researcher of the third question is "rate limited" on its first attempt, so one item retries
 * while the others go on); the writer gets the answers in the planner's order, whichever
 * finished first, and the most researchers that worked at once (never more than 4).
 *
 * An item's run sees only its item (`item`, `index`; its `input` is the item too), not the
 * parent run's input: what a researcher needs goes into the item, which is why each question
 * carries its topic.
 */
import { defineAgent } from "skein";

const ANGLES = [
  (t: string) => `What is ${t}?`,
  (t: string) => `Why does ${t} matter?`,
  (t: string) => `How does ${t} work?`,
  (t: string) => `What can go wrong with ${t}?`,
  (t: string) => `What comes next for ${t}?`,
];

/** A short wait that ends early when the attempt is cancelled, so the four at a time show in `skein run`. */
function work(task: { signal: AbortSignal }, ms = 50): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    task.signal.addEventListener("abort", () => {
      clearTimeout(timer);
      reject(task.signal.reason);
    });
  });
}

/** One researcher's answer, as the writer gets it. */
type Finding = { number: number; question: string; answer: string; at_once: number };

/** Researchers working now in this process: each answer says how many were (itself included) when it began. */
let researching = 0;

export default {
  planner: defineAgent<{ topic: string }>((task) => {
    const { topic } = task.payload;
    return { questions: ANGLES.map((angle) => ({ topic, question: angle(topic) })) };
  }),

  researcher: defineAgent<{ question: string; topic: string; number: number }, Finding>(async (task) => {
    const { question, topic, number } = task.payload;
    researching += 1;
    const atOnce = researching;
    try {
      await work(task);
    } finally {
      researching -= 1;
    }
    if (number === 3 && task.attempt === 1) throw new Error("429 Too Many Requests: the search tool is rate limited");
    return {
      number,
      question,
      answer: `Notes on "${question}" (${topic}), found on attempt ${task.attempt}.`,
      at_once: atOnce,
    };
  }),

  writer: defineAgent<{ topic: string; findings: Finding[] }>((task) => {
    const { topic, findings } = task.payload;
    const sections = findings.map((f) => `## ${f.number}. ${f.question}\n\n${f.answer}`);
    return {
      title: `Research report: ${topic}`,
      questions: findings.length,
      most_researchers_at_once: Math.max(...findings.map((f) => f.at_once)),
      report: sections.join("\n\n"),
    };
  }),
};
