/**
 * `orders` runs the agent node's `lookup_order` tool in this process, and `refunds` its
 * `refund_order` tool once a person approved the call: the model's arguments
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

/** The orders refunded so far, by id (a real payment service keeps these). */
export const refunded = new Map<string, { key: string; reason: string | null }>();

export default {
  /**
   * `refund_order`: runs only after a person approved the call (the tool's `approval`). Its
   * idempotency key is task.execution_id: a call run again after a crash refunds nothing twice.
   */
  async refunds(task: Task): Promise<{ order_id: string; refunded: true }> {
    const { order_id, reason } = task.payload as { order_id: string; reason?: string };
    const order = orders[order_id.trim().toUpperCase()];
    if (!order) throw new Error(`no order ${order_id}`);
    const done = refunded.get(order.order_id);
    if (done && done.key !== task.execution_id) throw new Error(`order ${order.order_id} is refunded already`);
    refunded.set(order.order_id, { key: task.execution_id, reason: reason ?? null });
    return { order_id: order.order_id, refunded: true };
  },
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
