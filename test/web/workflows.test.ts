/** The workflow editor: validation as you type, an invalid save refused with its problems, new versions saved. */
import { describe, expect, it } from "vitest";
import { editorText, PUBLISH, pasteIntoEditor, serve, signIn } from "./helpers.js";

const INVALID = {
  id: "broken-flow",
  nodes: [
    { node_id: "a", agent_type: "echo" },
    { node_id: "b", agent_type: "echo", depends_on: ["nope"] },
  ],
};

describe("the workflow editor", { timeout: 90_000 }, () => {
  it("lists problems with their paths as you type, refuses to save an invalid workflow, then saves the fixed one", async () => {
    const s = await serve();
    await signIn(s);
    const { page } = s;
    await page.getByRole("navigation", { name: "pages" }).getByRole("link", { name: "Workflows" }).click();
    await page.getByRole("link", { name: "New workflow" }).click();
    const validation = page.getByRole("region", { name: "validation" });
    const preview = page.getByRole("region", { name: "graph preview" });
    // The template is valid, and drawn.
    await page.locator('.verdict[data-verdict="true"]').waitFor();
    await preview.locator('g.node[data-node-id="check"]').waitFor();

    await pasteIntoEditor(page, '{ "id": "broken-flow", "nodes": [');
    await validation.getByText("(JSON)").waitFor();
    expect(await page.getByRole("button", { name: "Save as new version" }).isDisabled()).toBe(true);

    await pasteIntoEditor(page, JSON.stringify(INVALID, null, 2));
    const problem = validation.locator("ul.problems.error li", { hasText: "nodes[1].depends_on[0]" });
    await problem.waitFor();
    expect(await problem.textContent()).toMatch(/^nodes\[1\]\.depends_on\[0\]: unknown node "nope"/);
    // The preview draws what can be drawn of an invalid definition.
    await preview.locator('g.node[data-node-id="b"]').waitFor();

    await page.getByRole("button", { name: "Save as new version" }).click();
    const refusal = page.locator(".error-note", { hasText: "Not saved" });
    await refusal.locator("li", { hasText: 'nodes[1].depends_on[0]: unknown node "nope"' }).waitFor();
    expect(await s.api<{ workflows: unknown[] }>("GET", "/v1/workflows")).toEqual({ workflows: [] });

    await pasteIntoEditor(
      page,
      JSON.stringify({ ...INVALID, nodes: [INVALID.nodes[0], { ...INVALID.nodes[1], depends_on: ["a"] }] }),
    );
    await page.locator('.verdict[data-verdict="true"]').waitFor();
    // (attached, not visible: a straight vertical edge has no width, which playwright counts as hidden)
    await preview.locator('g.edge[data-from="a"][data-to="b"]').waitFor({ state: "attached" });
    await page.getByRole("button", { name: "Save as new version" }).click();
    await page.getByText("Saved broken-flow as version 1.").waitFor();
    await page.getByRole("navigation", { name: "workflows" }).getByRole("link", { name: "broken-flow" }).waitFor();
    expect(page.url()).toContain("#/workflows/broken-flow?version=1");
  });

  it("edits a registered workflow into a new version, and keeps the old one readable", async () => {
    const s = await serve();
    await s.api("PUT", "/v1/workflows/publish", PUBLISH);
    await signIn(s);
    const { page } = s;
    await page.goto(`${s.url}/#/workflows/publish`);
    await page.locator('.verdict[data-verdict="true"]').waitFor();
    // The text as its author wrote it: keys in their order (node_id before agent_type, a review's
    // timeout before its payload), not sorted, and no version.
    const text = await editorText(page);
    expect(text).toBe(JSON.stringify(PUBLISH, null, 2));
    const definition = JSON.parse(text) as Record<string, unknown>;
    expect(definition).not.toHaveProperty("version");
    // A key added at the end stays at the end, once saved and loaded again.
    const edited = { ...definition, description: "Now with a description" };
    await pasteIntoEditor(page, JSON.stringify(edited, null, 2));
    await page.getByRole("button", { name: "Save as new version" }).click();
    await page.getByText("Saved publish as version 2.").waitFor();
    await page.locator(".description", { hasText: "Now with a description" }).waitFor();
    await page.reload();
    await page.locator('.verdict[data-verdict="true"]').waitFor();
    expect(await editorText(page)).toBe(JSON.stringify(edited, null, 2));

    await page.getByLabel("version", { exact: true }).selectOption("1");
    await page.waitForFunction(
      () => document.querySelector<HTMLSelectElement>(".workflow-detail select[name=version]")?.value === "1",
    );
    await page.locator(".workflow-detail .cm-content").waitFor();
    expect(await page.locator(".description").count()).toBe(0);
    expect(await editorText(page)).not.toContain("Now with a description");
  });
});
