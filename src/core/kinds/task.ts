/** `task`: any agent_type no other kind reserves; an agent runs each attempt. */
import type { NodeKind } from "./kind.js";

export const task: NodeKind = { name: "task", start: "agent", retries: true };
