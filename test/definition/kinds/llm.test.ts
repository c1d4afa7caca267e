/** `llm`'s rules: `{ model, prompt | messages, temperature?, max_tokens?, response_format?, tools?, tool_choice?, provider? }`. */
import { describe, expect, it } from "vitest";
import { errorsOf, expectOneError, expectValid, withNode } from "./helpers.js";

const ask = (payload: unknown) => withNode("llm", { payload });
const MODEL = { model: "gpt-4o-mini" };

describe("llm: payload", () => {
  it("accepts a prompt or messages, with its options and templates", () => {
    expectValid(ask({ ...MODEL, prompt: "Summarize {{ input.text }}", temperature: 0.2, max_tokens: 200 }));
    expectValid(
      ask({
        ...MODEL,
        messages: [
          { role: "system", content: "Be brief." },
          { role: "user", content: "{{ input.question }}" },
        ],
        tool_choice: "auto",
        provider: "local",
      }),
    );
    expectValid(ask({ model: "{{ input.model }}", prompt: "hi", max_tokens: "{{ input.max }}" }));
  });

  it("refuses a payload that is not an object (the format's rule, before the kind's)", () => {
    const [first] = errorsOf(ask("hi"));
    expect(first?.path).toBe("nodes[0].payload");
    expect(first?.message).toContain("expected an object");
  });

  it("refuses a missing or empty model", () => {
    expectOneError(ask({ prompt: "hi" }), "nodes[0].payload.model", "is required: the provider's model name");
    expectOneError(
      ask({ model: "", prompt: "hi" }),
      "nodes[0].payload.model",
      "must be a non-empty string (the provider's model name)",
    );
  });

  it("refuses neither or both of prompt and messages", () => {
    expectOneError(ask(MODEL), "nodes[0].payload", "needs messages (a list of { role, content }) or prompt");
    expectOneError(
      ask({ ...MODEL, prompt: "a", messages: [{ role: "user", content: "b" }] }),
      "nodes[0].payload",
      "has both messages and prompt: give one",
    );
  });

  it("refuses a prompt that is not a string, and malformed messages, each with its index", () => {
    expectOneError(ask({ ...MODEL, prompt: 5 }), "nodes[0].payload.prompt", "must be a string (one user message)");
    expectOneError(
      ask({ ...MODEL, messages: [] }),
      "nodes[0].payload.messages",
      "must be a non-empty list of { role, content }",
    );
    expectOneError(
      ask({
        ...MODEL,
        messages: [
          { role: "user", content: "a" },
          { role: "robot", content: "b" },
        ],
      }),
      "nodes[0].payload.messages[1].role",
      "must be one of",
    );
    expectOneError(
      ask({ ...MODEL, messages: [{ role: "user", content: 5 }] }),
      "nodes[0].payload.messages[0].content",
      "must be a string (or a list of content parts)",
    );
  });

  it("refuses options out of range and an unknown field with a suggestion", () => {
    expectOneError(
      ask({ ...MODEL, prompt: "a", temperature: 3 }),
      "nodes[0].payload.temperature",
      "must be a number from 0 to 2, got 3",
    );
    expectOneError(
      ask({ ...MODEL, prompt: "a", max_tokens: 0 }),
      "nodes[0].payload.max_tokens",
      "must be a whole number of tokens, 1 or more, got 0",
    );
    expectOneError(
      ask({ ...MODEL, prompt: "a", tool_choice: "always" }),
      "nodes[0].payload.tool_choice",
      'must be "auto", "none", "required"',
    );
    expectOneError(
      ask({ ...MODEL, prompt: "a", tools: {} }),
      "nodes[0].payload.tools",
      "must be a list of OpenAI tool definitions",
    );
    expectOneError(
      ask({ ...MODEL, prompt: "a", provider: "" }),
      "nodes[0].payload.provider",
      "must be the name of one of the engine's providers",
    );
    expectOneError(
      ask({ ...MODEL, prompt: "a", temprature: 1 }),
      "nodes[0].payload.temprature",
      'is not a field of an llm payload (did you mean "temperature"?)',
    );
  });

  it("reports every problem of the payload", () => {
    const errors = errorsOf(ask({ prompt: 5, temperature: -1 }));
    expect(errors.map((e) => e.path).sort()).toEqual([
      "nodes[0].payload.model",
      "nodes[0].payload.prompt",
      "nodes[0].payload.temperature",
    ]);
  });

  it("does not refuse a document stored before llm was a built-in kind", () => {
    expectValid(ask({ anything: true }), { stored: true });
  });
});
