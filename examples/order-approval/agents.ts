/**
 * Simulated inventory, payment and shipping services for the order-approval example. Each
 * side effect is keyed by the task's execution_id (stable across attempts), so a retried
 * attempt would reserve or charge once; the compensations undo by the ids that the original
 * step returned (`self.output` in their payload). Every agent logs what it does to stderr.
 */
import { createHash } from "node:crypto";
import { defineAgent, type Task } from "skein";

function log(task: Pick<Task, "run_id" | "node_id" | "visit">, message: string): void {
  process.stderr.write(`[${task.run_id.slice(-8)}] ${task.node_id}#${task.visit}: ${message}\n`);
}

/** An id derived from the idempotency key: every attempt of a visit gets the same one. */
function idOf(prefix: string, task: Pick<Task, "execution_id">): string {
  return `${prefix}-${createHash("sha256").update(task.execution_id).digest("hex").slice(0, 10)}`;
}

export default {
  inventory: defineAgent<{ sku: string; quantity: number }>((task) => {
    const { sku, quantity } = task.payload;
    const reservation_id = idOf("res", task);
    log(task, `reserved ${quantity} x ${sku} (${reservation_id})`);
    return { reservation_id, sku, quantity };
  }),

  inventory_release: defineAgent<{ reservation_id: string; sku: string }>((task) => {
    const { reservation_id, sku } = task.payload;
    log(task, `released reservation ${reservation_id} of ${sku}`);
    return { released: reservation_id };
  }),

  payments: defineAgent<{ order_id: string; amount: number }>((task) => {
    const { order_id, amount } = task.payload;
    const charge_id = idOf("ch", task);
    log(task, `charged ${amount} for order ${order_id} (${charge_id})`);
    return { charge_id, amount };
  }),

  payments_refund: defineAgent<{ charge_id: string; amount: number }>((task) => {
    const { charge_id, amount } = task.payload;
    log(task, `refunded ${amount} of charge ${charge_id}`);
    return { refunded: charge_id, amount };
  }),

  shipping: defineAgent<{ order_id: string; reservation_id: string; approved_by: string }>((task) => {
    const { order_id, reservation_id, approved_by } = task.payload;
    const tracking = idOf("trk", task);
    log(task, `shipped order ${order_id} from ${reservation_id}, approved by ${approved_by} (${tracking})`);
    return { order_id, tracking };
  }),
};
