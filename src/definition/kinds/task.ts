/** `task`: any agent_type no other kind reserves; an agent runs each attempt. */
import type { KindRules } from "./kind.js";

export const task: KindRules = { name: "task", start: "agent", retries: true };
