/** `human_review`'s states: IN_REVIEW until a person decides (`decideReview`) or its timeout passes. */
import { enterReview, nodeOf } from "../run-state.js";
import type { KindStates } from "./kind.js";

export const humanReview: KindStates = {
  begin: enterReview,
  due(rs, v, now, moves) {
    const seconds = nodeOf(rs, v.node_id).timeout;
    moves.failVisit(
      rs,
      v,
      "review_timeout",
      { message: `no decision within ${seconds} s`, reason: "review_timeout" },
      now,
    );
  },
};
