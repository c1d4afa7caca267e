/**
 * `orders` runs the agent node's `lookup_order` tool in this process: the model's arguments
 * (`{ order_id }`, checked against the tool's parameters) are its payload. It reads a small
 * in-memory table standing in for the shop's order service. An unknown id throws: the error
 * goes back to the model as the tool's answer (`error: no order A9999`), and the model decides
 * what to say; the run does not fail.
 */
import type { Task } from "skein";

export interface Order {
  order_id: string;
  status: "processing" | "shipped" | "delivered";
  items: string[];
  ordered_on: string;
  shipped_on?: string;
  delivered_on?: string;
  expected_by?: string;
}

export const orders: Record<string, Order> = {
  A1001: {
    order_id: "A1001",
    status: "shipped",
    items: ["Trail running shoes (size 42)"],
    ordered_on: "2026-03-01",
    shipped_on: "2026-03-02",
    expected_by: "2026-03-05",
  },
  A1002: {
    order_id: "A1002",
    status: "delivered",
    items: ["Rain jacket", "Wool socks (2 pairs)"],
    ordered_on: "2026-02-20",
    shipped_on: "2026-02-21",
    delivered_on: "2026-02-24",
  },
  A1003: {
    order_id: "A1003",
    status: "processing",
    items: ["Camping stove"],
    ordered_on: "2026-03-03",
    expected_by: "2026-03-09",
  },
};

export default {
  async orders(task: Task): Promise<Order> {
    const { order_id } = task.payload as { order_id: string };
    // task.execution_id is this tool call's idempotency key (`<visit's execution_id>:<turn>:<index>`),
    // the same every time the call runs again after a crash: a real order service would get it
    // with the request (an Idempotency-Key header), so a repeat is answered, not done twice.
    const order = orders[order_id.trim().toUpperCase()];
    if (!order) throw new Error(`no order ${order_id}`);
    return order;
  },
};
