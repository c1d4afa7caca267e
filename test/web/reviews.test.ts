/** The approvals inbox: approve (the run finishes), reject (the failure branch), and a decision that lost a race. */
import { describe, expect, it } from "vitest";
import { nodeInState, PUBLISH, runStatus, type Served, serve, signIn, TOKENS } from "./helpers.js";

interface Visit {
  node_id: string;
  state: string;
  output: unknown;
  error: { reason: string } | null;
}

/** A run of PUBLISH whose draft the external writer finished: its review is pending. */
async function runAtReview(s: Served, topic: string): Promise<string> {
  await s.api("PUT", "/v1/workflows/publish", PUBLISH);
  const run = await s.api<{ run_id: string }>("POST", "/v1/runs", { workflow_id: "publish", input: { topic } });
  await s.completeWriterTask({ text: `A draft about ${topic}` });
  return run.run_id;
}

async function openInbox(s: Served) {
  await s.page.getByRole("navigation", { name: "pages" }).getByRole("link", { name: /Inbox/ }).click();
}

describe("the approvals inbox", { timeout: 90_000 }, () => {
  it("approves a review with a comment and an edited output: the result shows at once and the run finishes", async () => {
    const s = await serve();
    const runId = await runAtReview(s, "agents");
    await signIn(s);
    await openInbox(s);
    const { page } = s;
    const card = page.locator(`article.review[data-run-id="${runId}"]`);
    await card.waitFor();
    expect(await card.locator(".review-title").textContent()).toBe("Publish the draft about agents?");
    expect(await card.locator(".instructions").textContent()).toContain("approve to publish it");
    expect(await card.locator(".assignees").textContent()).toBe("ops, alice");
    // The review's timeout is an hour: what is left reads as about that much.
    expect(await card.locator(".time-left").textContent()).toMatch(/^(1 h 0 min|59 min \d{1,2} s)$/);
    await card.locator("pre.json", { hasText: "A draft about agents" }).waitFor();

    await card.getByLabel("Comment").fill("Looks good");
    await card.getByLabel("Approve with an edited output").check();
    await card.getByLabel("Output (JSON)").fill('{ "text": "An edited draft" }');
    await card.getByRole("button", { name: "Approve" }).click();

    const outcome = page.locator("article.outcome.decided");
    await outcome.getByText("Approved by ops").waitFor();
    expect(await outcome.locator(".badge").textContent()).toBe("SUCCEEDED");
    await card.waitFor({ state: "detached" });

    await outcome.getByRole("link", { name: runId }).click();
    await runStatus(page, "SUCCEEDED");
    await nodeInState(page, "publish", "SUCCEEDED");
    await nodeInState(page, "rework", "SKIPPED");
    const run = await s.api<{ nodes: Visit[] }>("GET", `/v1/runs/${runId}`);
    expect(run.nodes.find((n) => n.node_id === "check")?.output).toEqual({
      decision: "approve",
      by: "ops",
      comment: "Looks good",
      output: { text: "An edited draft" },
    });
  });

  it("rejects a review: the run takes the failure branch, which the graph shows", async () => {
    const s = await serve();
    const runId = await runAtReview(s, "sources");
    await signIn(s);
    await openInbox(s);
    const { page } = s;
    const card = page.locator(`article.review[data-run-id="${runId}"]`);
    await card.getByLabel("Comment").fill("Needs sources");
    await card.getByRole("button", { name: "Reject" }).click();
    const outcome = page.locator("article.outcome.decided");
    await outcome.getByText("Rejected").waitFor();
    expect(await outcome.locator(".badge").textContent()).toBe("FAILED");

    await outcome.getByRole("link", { name: runId }).click();
    // A routed failure is handled: rework runs and the run succeeds.
    await runStatus(page, "SUCCEEDED");
    await nodeInState(page, "check", "FAILED");
    await nodeInState(page, "rework", "SUCCEEDED");
    const publish = await nodeInState(page, "publish", "SKIPPED");
    expect(await publish.evaluate((g) => getComputedStyle(g).opacity)).toBe("0.4");
    expect(await page.locator('g.edge[data-from="check"][data-to="rework"]').getAttribute("data-taken")).toBe("true");
    expect(await page.locator('g.edge[data-from="check"][data-to="publish"]').getAttribute("data-taken")).toBe("false");
    const check = (await s.api<{ nodes: Visit[] }>("GET", `/v1/runs/${runId}`)).nodes.find(
      (n) => n.node_id === "check",
    );
    expect(check?.error?.reason).toBe("rejected");
  });

  it("an admin who is not an assignee chooses one to decide as: the decision is recorded as theirs, made by the admin", async () => {
    const s = await serve();
    const forOthers = {
      ...PUBLISH,
      nodes: PUBLISH.nodes.map((n) =>
        n.node_id === "check" ? { ...n, payload: { ...n.payload, assignees: ["alice", "bob"] } } : n,
      ),
    };
    await s.api("PUT", "/v1/workflows/publish", forOthers);
    const { run_id: runId } = await s.api<{ run_id: string }>("POST", "/v1/runs", {
      workflow_id: "publish",
      input: { topic: "proxies" },
    });
    await s.completeWriterTask({ text: "A draft about proxies" });
    await signIn(s);
    await openInbox(s);
    const card = s.page.locator(`article.review[data-run-id="${runId}"]`);
    const approve = card.getByRole("button", { name: "Approve" });
    await card.getByLabel(/^Decide as/).waitFor();
    // Nobody chosen yet: nothing to send that the server would refuse.
    expect(await approve.isDisabled()).toBe(true);
    await card.getByLabel(/^Decide as/).selectOption("bob");
    await approve.click();
    await s.page.locator("article.outcome.decided").getByText("Approved by bob").waitFor();
    const { events } = await s.api<{ events: { type: string; data: Record<string, unknown> }[] }>(
      "GET",
      `/v1/runs/${runId}/events`,
    );
    expect(events.find((e) => e.type === "review.decided")?.data).toMatchObject({ by: "bob", admin: "ops" });
  });

  it("a decision on a review someone else decided first shows a clear conflict message", async () => {
    const s = await serve();
    const runId = await runAtReview(s, "races");
    const { page } = s;
    // No live updates for this page, so it still offers the review after alice decides it elsewhere.
    await page.route("**/v1/stream**", (route) => route.abort());
    await signIn(s);
    await openInbox(s);
    const card = page.locator(`article.review[data-run-id="${runId}"]`);
    await card.waitFor();

    await s.api("POST", `/v1/runs/${runId}/nodes/check/review`, { decision: "reject" }, TOKENS.alice);
    await card.getByRole("button", { name: "Approve" }).click();

    const conflict = page.locator("article.outcome.conflict");
    await conflict.getByText("was already decided by someone else, or timed out").waitFor();
    expect(await conflict.textContent()).toMatch(/The server said: .*check/);
    await card.waitFor({ state: "detached" });
    // alice's rejection stands.
    const check = (await s.api<{ nodes: Visit[] }>("GET", `/v1/runs/${runId}`)).nodes.find(
      (n) => n.node_id === "check",
    );
    expect(check?.state).toBe("FAILED");
  });
});
