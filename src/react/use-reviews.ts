/** useReviews: the pending reviews, read again on an interval and on demand. */
import { useCallback, useEffect, useRef, useState } from "react";
import type { Schema, SkeinClient } from "skein/client";

export interface UseReviewsOptions {
  /** The client to read with. Make it once (outside the component, or in useMemo). */
  client: SkeinClient;
  /** Only the reviews of these runs. @defaultValue every run the token may see */
  runIds?: readonly string[];
  /** How often to read them again, ms; 0: only on `refresh()`. @defaultValue 5000 */
  intervalMs?: number;
}

export interface ReviewsView {
  /** The pending reviews, oldest first; empty until the first answer. */
  reviews: Schema<"Review">[];
  /** Whether a read is under way. */
  loading: boolean;
  /** Why the last read failed (null when it succeeded). */
  error: Error | null;
  /** Reads them again now (after a decision, say). */
  refresh(): void;
}

/**
 * The reviews waiting for a decision (`GET /v1/reviews`).
 * @example
 * const { reviews, refresh } = useReviews({ client });
 * await client.decideReview({ run_id, node_id, body: { decision: "approve" } });
 * refresh();
 */
export function useReviews(options: UseReviewsOptions): ReviewsView {
  const { client, intervalMs = 5000 } = options;
  const runIds = options.runIds?.join(",");
  const [reviews, setReviews] = useState<Schema<"Review">[]>([]);
  const [loading, setLoading] = useState(false);
  const [error, setError] = useState<Error | null>(null);
  // Answers arrive in any order: only the latest read's is shown.
  const latest = useRef(0);

  const refresh = useCallback(() => {
    const read = ++latest.current;
    setLoading(true);
    client.listReviews({ status: "pending", ...(runIds ? { run_ids: runIds } : {}) }).then(
      (answer) => {
        if (read !== latest.current) return;
        setReviews(answer.reviews);
        setError(null);
        setLoading(false);
      },
      (e: unknown) => {
        if (read !== latest.current) return;
        setError(e instanceof Error ? e : new Error(String(e)));
        setLoading(false);
      },
    );
  }, [client, runIds]);

  useEffect(() => {
    refresh();
    const timer = intervalMs > 0 ? setInterval(refresh, intervalMs) : null;
    return () => {
      if (timer !== null) clearInterval(timer);
      // A read still under way when the options change or the component goes is not shown.
      latest.current++;
    };
  }, [refresh, intervalMs]);

  return { reviews, loading, error, refresh };
}
