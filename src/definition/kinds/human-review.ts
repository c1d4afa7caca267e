/**
 * `human_review`: IN_REVIEW until a person decides (`decideReview`) or its timeout passes
 * (core/kinds/human-review.ts). Its rules: who may decide (assignees fail closed).
 */
import { assigneesProblem } from "../assignees.js";
import { isWholeTemplate } from "../expressions.js";
import type { KindRules } from "./kind.js";

export const humanReview: KindRules = {
  name: "human_review",
  start: "engine",
  notClaimable: "wait for a person's decision",
  retries: false,
  validate(node, checks) {
    // Review assignees fail closed (DESIGN §13): a list of names, or one template that gives one.
    if (checks.stored || !("assignees" in node.payload)) return [];
    const assignees = node.payload.assignees;
    if (typeof assignees === "string" && isWholeTemplate(assignees)) return []; // checked when it is resolved
    const problem = assigneesProblem(assignees);
    if (problem === null) return [];
    const hint =
      typeof assignees === "string"
        ? `; a string is allowed only as one template, "{{ expr }}", that gives such a list (write ["${assignees.slice(0, 40)}"] for one name)`
        : "";
    return [{ path: `${checks.at}.payload.assignees`, message: `${problem}${hint}` }];
  },
  checkResolved(payload) {
    if (payload === null || typeof payload !== "object" || Array.isArray(payload) || !("assignees" in payload)) {
      return null;
    }
    const problem = assigneesProblem(payload.assignees);
    return problem === null ? null : `payload.assignees ${problem}: the review is refused rather than left to anyone`;
  },
};
