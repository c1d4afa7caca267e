/** The definition editor (CodeMirror): schema completion and hover docs, problems marked in the text, Format. */
import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { editorText, expectAccessible, pasteIntoEditor, serve, signIn } from "./helpers.js";

const UNKNOWN_DEPENDENCY = {
  id: "marked-flow",
  nodes: [
    { node_id: "a", agent_type: "echo" },
    { node_id: "b", agent_type: "echo", depends_on: ["nope"] },
  ],
};

const setText = pasteIntoEditor;

async function newWorkflow(page: Page, url: string): Promise<void> {
  await page.goto(`${url}/#/new-workflow`);
  await page.locator('.verdict[data-verdict="true"]').waitFor();
}

describe("the definition editor", { timeout: 90_000 }, () => {
  it("completes property names and enum values from the schema, and shows a key's description on hover", async () => {
    const s = await serve();
    await signIn(s);
    const { page } = s;
    await newWorkflow(page, s.url);
    await setText(page, '{\n  "id": "typed",\n  "nodes": [\n    { "node_id": "a", "agent_type": "echo" }\n  ]\n}');
    await page.locator('.verdict[data-verdict="true"]').waitFor();

    // Inside the node, after its last member: a new key, completed from the node's properties.
    const agentEcho = page.locator(".cm-line", { hasText: '"agent_type": "echo"' });
    await agentEcho.click();
    await page.keyboard.press("End");
    for (let i = 0; i < 2; i++) await page.keyboard.press("ArrowLeft"); // before " }"
    await page.keyboard.type(', "retry_b');
    const option = page.locator(".cm-tooltip-autocomplete li", { hasText: "retry_backoff" });
    await option.waitFor();
    // The option's description, from the schema.
    await page.locator(".cm-completionInfo", { hasText: "fixed, or exponential" }).waitFor();
    // The check of the half-typed text lands while the list is open (it must not get in the way),
    // after a pause in typing, which the list needs too before it takes Enter.
    await page.locator('.verdict[data-verdict="not-json"]').waitFor();
    await page.keyboard.press("Enter");
    await page.waitForFunction(() => document.querySelector(".cm-content")?.textContent?.includes('"retry_backoff": '));
    // Then the value: the enum's values are offered.
    await page.keyboard.type('"exp');
    await page.locator(".cm-tooltip-autocomplete li", { hasText: "exponential" }).waitFor();
    await page.locator('.verdict[data-verdict="false"]').waitFor(); // "exp" is no retry_backoff
    await page.keyboard.press("Enter");
    await page.waitForFunction(() =>
      document.querySelector(".cm-content")?.textContent?.includes('"retry_backoff": "exponential" }'),
    );
    expect(JSON.parse(await editorText(page))).toEqual({
      id: "typed",
      nodes: [{ node_id: "a", agent_type: "echo", retry_backoff: "exponential" }],
    });
    await page.locator('.verdict[data-verdict="true"]').waitFor();

    // agent_type offers the built-ins.
    await setText(page, '{\n  "id": "typed",\n  "nodes": [\n    { "node_id": "a", "agent_type": "" }\n  ]\n}');
    await page.locator('.verdict[data-verdict="false"]').waitFor();
    await page.locator(".cm-line", { hasText: '"agent_type": ""' }).click();
    await page.keyboard.press("End");
    for (let i = 0; i < 3; i++) await page.keyboard.press("ArrowLeft"); // inside ""
    await page.keyboard.type("human");
    await page.locator(".cm-tooltip-autocomplete li", { hasText: "human_review" }).waitFor();
    // The check of the text as typed comes after a pause in typing, which the list needs too
    // before it takes Enter (CodeMirror's interactionDelay).
    await page.locator('.verdict[data-verdict="true"]').waitFor();
    await page.keyboard.press("Enter");
    await page.waitForFunction(() => document.querySelector(".cm-content")?.textContent?.includes('"human_review" }'));

    // Hover over a key: its description.
    await page.locator(".cm-line .tok-propertyName", { hasText: '"node_id"' }).hover();
    await page
      .locator(".cm-tooltip-hover .cm-schema-doc", { hasText: "Unique id of the node in the workflow" })
      .waitFor();
    await expectAccessible(page);
  });

  it("marks each problem on the text of its path, and a JSON syntax error where it is", async () => {
    const s = await serve();
    await signIn(s);
    const { page } = s;
    await newWorkflow(page, s.url);
    await setText(page, JSON.stringify(UNKNOWN_DEPENDENCY, null, 2));
    const mark = page.locator(".cm-lintRange-error");
    await mark.first().waitFor();
    expect(await mark.allTextContents()).toEqual(['"nope"']);
    // The list under the editor stays.
    await page
      .getByRole("region", { name: "validation" })
      .locator("li", { hasText: "nodes[1].depends_on[0]" })
      .waitFor();
    // The mark's tooltip says what is wrong.
    await mark.first().hover();
    await page.locator(".cm-tooltip-hover .cm-diagnosticText", { hasText: 'unknown node "nope"' }).waitFor();

    // A syntax error: marked where the parser stopped, listed as (JSON).
    await setText(page, '{\n  "id": "x",\n  "nodes": [ }\n}');
    await page.getByRole("region", { name: "validation" }).getByText("(JSON)").waitFor();
    const syntax = page.locator(".cm-lintRange-error, .cm-lintPoint-error");
    await syntax.first().waitFor();
    expect(await page.locator(".cm-lintRange-error").allTextContents()).toEqual(["}"]);
    await expectAccessible(page);
  });

  it("formats with the button and with Shift-Alt-F, updates the preview, and registers", async () => {
    const s = await serve();
    await signIn(s);
    const { page } = s;
    await newWorkflow(page, s.url);
    const preview = page.getByRole("region", { name: "graph preview" });
    const compact = JSON.stringify({
      id: "formatted",
      nodes: [
        { node_id: "first", agent_type: "echo" },
        { node_id: "second", agent_type: "echo", depends_on: ["first"] },
      ],
    });
    await setText(page, compact);
    await preview.locator('g.node[data-node-id="second"]').waitFor();
    await preview.locator('g.edge[data-from="first"][data-to="second"]').waitFor({ state: "attached" });
    const pretty = JSON.stringify(JSON.parse(compact), null, 2);
    await page.getByRole("button", { name: "Format" }).click();
    await page.waitForFunction(
      (n) => document.querySelectorAll(".cm-content .cm-line").length === n,
      pretty.split("\n").length,
    );
    expect(await editorText(page)).toBe(pretty);

    await setText(page, compact);
    await page.waitForFunction(() => document.querySelectorAll(".cm-content .cm-line").length === 1);
    await page.keyboard.press("Shift+Alt+F");
    await page.waitForFunction(
      (n) => document.querySelectorAll(".cm-content .cm-line").length === n,
      pretty.split("\n").length,
    );
    expect(await editorText(page)).toBe(pretty);

    await page.locator('.verdict[data-verdict="true"]').waitFor();
    await page.getByRole("button", { name: "Save as new version" }).click();
    await page.getByText("Saved formatted as version 1.").waitFor();
    const saved = await s.api<{ definition: { nodes: unknown[] } }>("GET", "/v1/workflows/formatted");
    expect(saved.definition.nodes).toHaveLength(2);
  });
});
