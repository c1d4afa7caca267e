/**
 * "Upgrade runs" on a workflow version's page (DESIGN §16): a dry run lists the runs that would
 * move and each refused run with its reasons; moving them moves only those.
 */
import { describe, expect, it } from "vitest";
import { expectAccessible, serve, signIn } from "./helpers.js";

const V1 = {
  id: "up",
  nodes: [
    { node_id: "gate", agent_type: "human_review", next_on_success: "second" },
    { node_id: "second", agent_type: "human_review" },
  ],
};
/** The gate now leads to a new node: a run whose gate already fired into `second` cannot move. */
const V2 = {
  id: "up",
  nodes: [
    { node_id: "gate", agent_type: "human_review", next_on_success: "extra" },
    { node_id: "second", agent_type: "human_review" },
    { node_id: "extra", agent_type: "echo" },
  ],
};

describe("upgrading runs on the page", { timeout: 90_000 }, () => {
  it("lists what would move and why the others would not, then moves them", async () => {
    const s = await serve();
    await s.api("PUT", "/v1/workflows/up", V1);
    const waiting = await s.api<{ run_id: string }>("POST", "/v1/runs", { workflow_id: "up" });
    const further = await s.api<{ run_id: string }>("POST", "/v1/runs", { workflow_id: "up" });
    const reviews = async () =>
      (await s.api<{ reviews: { run_id: string; node_id: string }[] }>("GET", "/v1/reviews")).reviews
        .map((r) => `${r.run_id === waiting.run_id ? "waiting" : "further"}:${r.node_id}`)
        .sort();
    await expect.poll(reviews).toEqual(["further:gate", "waiting:gate"]);
    await s.api("POST", `/v1/runs/${further.run_id}/nodes/gate/review`, { decision: "approve" });
    await expect.poll(reviews).toEqual(["further:second", "waiting:gate"]);
    await s.api("PUT", "/v1/workflows/up", V2);

    await signIn(s);
    const { page } = s;
    await page.goto(`${s.url}/#/workflows/up?version=2`);
    await page.getByText("Upgrade runs").click();
    await page.getByRole("button", { name: "Check runs" }).click();
    const region = page.getByRole("region", { name: "upgrade" });
    await region.getByRole("status").waitFor();
    expect(await region.getByRole("status").textContent()).toBe("1 run would move to version 2.");
    expect(await region.getByRole("list", { name: "would move" }).textContent()).toBe(
      `${waiting.run_id} from version 1`,
    );
    expect(await region.getByRole("list", { name: "reasons" }).getByRole("listitem").allTextContents()).toEqual([
      'node "gate" fired the edge gate → second (next_on_success), which the new version no longer has',
    ]);
    await expectAccessible(page, "a dry run of upgrading runs");

    await region.getByRole("button", { name: "Move 1 run" }).click();
    await region.getByText("Moved 1 run to version 2.").waitFor();
    const version = async (id: string) =>
      (await s.api<{ workflow_version: number }>("GET", `/v1/runs/${id}`)).workflow_version;
    expect(await version(waiting.run_id)).toBe(2);
    expect(await version(further.run_id)).toBe(1);
  });
});
