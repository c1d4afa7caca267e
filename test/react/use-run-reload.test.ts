/**
 * useRun across a reload (DESIGN §15): a page reloaded while a node streams shows the text
 * streamed so far, replayed from the run's kept stream (`?from=start`), and goes on appending.
 */
import { describe, expect, it } from "vitest";
import { claimWriter, servePage } from "./helpers.js";

const ONE = { id: "one", nodes: [{ node_id: "draft", agent_type: "writer" }] };

describe("useRun across a reload", { timeout: 90_000 }, () => {
  it("shows a running node's streamed text again, replayed from the start, then what follows", async () => {
    const p = await servePage();
    await p.api("PUT", "/v1/workflows/one", ONE);
    const run = await p.api<{ run_id: string }>("POST", "/v1/runs", { workflow_id: "one", input: {} });
    const writer = await claimWriter(p);
    const { page } = p;
    await p.openRun(run.run_id);
    await page
      .getByTestId("connection")
      .filter({ hasText: /^connected$/ })
      .waitFor();
    const text = page.getByTestId("text-draft");
    await writer.progress({ delta: "One, " });
    await text.filter({ hasText: /^One, $/ }).waitFor();
    await writer.progress({ delta: "two, " });
    await text.filter({ hasText: /^One, two, $/ }).waitFor();

    await page.reload();
    await page.getByTestId("state-draft").filter({ hasText: "RUNNING" }).waitFor();
    await text.filter({ hasText: /^One, two, $/ }).waitFor();
    await page
      .getByTestId("connection")
      .filter({ hasText: /^connected$/ })
      .waitFor();
    await writer.progress({ delta: "three." });
    await text.filter({ hasText: /^One, two, three\.$/ }).waitFor();

    await writer.complete({ text: "One, two, three." });
    await page.getByTestId("status").filter({ hasText: "SUCCEEDED" }).waitFor();
    expect(await text.textContent()).toBe("One, two, three.");
  });
});
