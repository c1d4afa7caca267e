/**
 * `skein/react`: React hooks over skein/client. `useRun(runId, { client })` is a run's live
 * state and each node's streamed text; `useReviews({ client })` the pending reviews. React is an
 * optional peer dependency: only those who import skein/react need it. docs/client.md shows them.
 */
export type { NodeStream, RunView } from "./run-view.js";
export { type ReviewsView, type UseReviewsOptions, useReviews } from "./use-reviews.js";
export { type UseRunOptions, useRun } from "./use-run.js";
