/** The run page's "send event" form: offered while a wait_event waits; the event moves the run on, live. */
import { describe, expect, it } from "vitest";
import { nodeInState, runStatus, serve, signIn } from "./helpers.js";

const PAYMENT = {
  id: "payment",
  nodes: [
    { node_id: "paid", agent_type: "wait_event", payload: { event: "payment.received" }, next_on_success: "ship" },
    { node_id: "ship", agent_type: "echo" },
  ],
};

describe("send event in the admin page", { timeout: 90_000 }, () => {
  it("sends an event to the waiting node; a payload that is not JSON is refused in the dialog", async () => {
    const s = await serve();
    await s.api("PUT", "/v1/workflows/payment", PAYMENT);
    const run = await s.api<{ run_id: string }>("POST", "/v1/runs", { workflow_id: "payment" });
    await signIn(s);
    const { page } = s;
    await page.goto(`${s.url}/#/runs/${run.run_id}`);
    await nodeInState(page, "paid", "WAITING");

    await page.getByRole("button", { name: "Send event…" }).click();
    const dialog = page.getByRole("dialog", { name: "Send an event?" });
    expect(await dialog.getByLabel("Event").inputValue()).toBe("payment.received");
    await dialog.getByLabel("Payload (JSON)").fill("{amount: 12");
    await dialog.getByRole("button", { name: "Send the event" }).click();
    await dialog.getByText("The payload is not JSON").waitFor();

    await dialog.getByLabel("Payload (JSON)").fill('{"amount": 12}');
    await dialog.getByRole("button", { name: "Send the event" }).click();
    await dialog.waitFor({ state: "detached" });
    await nodeInState(page, "paid", "SUCCEEDED");
    await runStatus(page, "SUCCEEDED");
    expect(await page.getByRole("button", { name: "Send event…" }).count()).toBe(0);
    const done = await s.api<{ nodes: { node_id: string; output: unknown }[] }>("GET", `/v1/runs/${run.run_id}`);
    expect(done.nodes.find((n) => n.node_id === "paid")?.output).toEqual({ amount: 12 });
  });
});
