/** Forking from a node on the admin page (DESIGN §16): the dialog, its edits, and the new run's page. */
import { describe, expect, it } from "vitest";
import { expectAccessible, nodeInState, PUBLISH, serve, signIn } from "./helpers.js";

interface RunBody {
  run_id: string;
  input: unknown;
  forked_from: { run_id: string; node_id: string } | null;
  nodes: { node_id: string; state: string; payload: unknown }[];
}

describe("fork on the admin page", { timeout: 90_000 }, () => {
  it("forks a run waiting in a review from that node with an edited input and payload, then shows the new run", async () => {
    const s = await serve();
    await s.api("PUT", "/v1/workflows/publish", PUBLISH);
    const source = await s.api<RunBody>("POST", "/v1/runs", { workflow_id: "publish", input: { topic: "cats" } });
    expect(await s.completeWriterTask({ text: "about cats" })).toEqual({ run_id: source.run_id, node_id: "draft" });
    await signIn(s);
    const { page } = s;
    await page.goto(`${s.url}/#/runs/${source.run_id}?node=check`);
    await nodeInState(page, "check", "IN_REVIEW");

    await page.getByRole("button", { name: "Fork from here…" }).click();
    const dialog = page.getByRole("dialog", { name: "Fork from check?" });
    await expectAccessible(page, "the fork dialog");
    const input = dialog.getByLabel("Run input (JSON)");
    expect(JSON.parse(await input.inputValue())).toEqual({ topic: "cats" });
    const payload = dialog.getByLabel(/Payload of check/);
    const shown = JSON.parse(await payload.inputValue()) as Record<string, unknown>;
    expect(shown.title).toBe("Publish the draft about cats?");
    await input.fill('{"topic": "owls"}');
    await payload.fill(JSON.stringify({ ...shown, title: "Publish it after all?" }));
    // JSON that does not parse stays in the dialog, naming what.
    await payload.fill("{ nope");
    await dialog.getByRole("button", { name: "Fork the run" }).click();
    await dialog.getByText(/payloads\.check is not JSON/).waitFor();
    await payload.fill(JSON.stringify({ ...shown, title: "Publish it after all?" }));
    await dialog.getByRole("button", { name: "Fork the run" }).click();

    // The page goes to the new run, which says where it came from.
    const forkedFrom = page.locator("dd.forked-from");
    await forkedFrom.waitFor();
    expect(await forkedFrom.textContent()).toBe(`${source.run_id} (from node check)`);
    const forkId = /#\/runs\/([^?]+)/.exec(page.url())?.[1] as string;
    expect(forkId).not.toBe(source.run_id);
    await nodeInState(page, "check", "IN_REVIEW");
    const fork = await s.api<RunBody>("GET", `/v1/runs/${forkId}`);
    expect(fork.forked_from).toEqual({ run_id: source.run_id, node_id: "check" });
    expect(fork.input).toEqual({ topic: "owls" });
    // The draft was kept (no writer task was completed for the fork); the review asks the edited question.
    expect(fork.nodes.find((n) => n.node_id === "draft")?.state).toBe("SUCCEEDED");
    expect(fork.nodes.find((n) => n.node_id === "check")?.payload).toMatchObject({ title: "Publish it after all?" });
    // The source still waits in its own review.
    const after = await s.api<RunBody>("GET", `/v1/runs/${source.run_id}`);
    expect(after.nodes.find((n) => n.node_id === "check")?.state).toBe("IN_REVIEW");
    expect(after.forked_from).toBeNull();
  });
});
