/**
 * A map node's items (DESIGN §11.1), 50 to a page: each one's state, a preview of its value and
 * output, and a link to the run that runs it. A map may have thousands of items, so they are
 * read a page at a time (GET /v1/runs/{id}/nodes/{node_id}/items), never with the run. The page
 * shown is read again whenever the visit's counts change (an item started or ended).
 */
import { useEffect, useRef, useState } from "preact/hooks";
import { api, query } from "../api.js";
import { Badge, ErrorNote } from "../components.js";
import { shortId, text } from "../format.js";
import { useLoad } from "../hooks.js";
import { href } from "../route.js";
import type { MapCounts, MapItemPage, Visit } from "../types.js";

export const ITEMS_PER_PAGE = 50;
const PREVIEW_CHARS = 80;

/** Counts in words: `37 of 100 ended: 35 succeeded, 2 failed, 4 running, 59 pending`. */
export function countsLine(c: MapCounts): string {
  const ended = c.succeeded + c.failed + c.cancelled;
  const parts = [`${c.succeeded} succeeded`, `${c.failed} failed`];
  if (c.cancelled > 0) parts.push(`${c.cancelled} cancelled`);
  parts.push(`${c.running} running`, `${c.pending} pending`);
  return `${ended} of ${c.total} ended: ${parts.join(", ")}`;
}

export function MapItems(props: { visit: Visit; counts: MapCounts }) {
  const { visit: v, counts } = props;
  // The `after` of each page shown so far: the last is the current page, the ones before go back.
  const [pages, setPages] = useState<number[]>([-1]);
  const after = pages[pages.length - 1] ?? -1;
  const key = `${v.run_id}:${v.node_id}:${v.visit}`;
  useEffect(() => setPages([-1]), [key]);
  const path = `/v1/runs/${encodeURIComponent(v.run_id)}/nodes/${encodeURIComponent(v.node_id)}/items`;
  const page = useLoad(
    () => api<MapItemPage>("GET", `${path}${query({ visit: v.visit, after, limit: ITEMS_PER_PAGE })}`),
    `${key}:${after}`,
  );
  const changes = `${counts.running}:${counts.succeeded}:${counts.failed}:${counts.cancelled}`;
  const seen = useRef(changes);
  useEffect(() => {
    // The first counts came with the first load; later ones mean items started or ended.
    if (seen.current === changes) return;
    seen.current = changes;
    page.reload();
  }, [changes, page.reload]);

  const items = page.data?.items ?? [];
  const first = after + 1;
  const next = page.data?.next_after ?? null;
  return (
    <section class="map-items" aria-label="map items">
      <h4>Items</h4>
      <progress
        class="map-progress"
        value={counts.succeeded + counts.failed + counts.cancelled}
        max={Math.max(counts.total, 1)}
        aria-label={`items ended: ${counts.succeeded} succeeded, ${counts.failed} failed, ${counts.running} running, of ${counts.total}`}
      />
      <p class="map-counts">{countsLine(counts)}</p>
      <ErrorNote error={page.error} prefix="Could not load the items" />
      {items.length === 0 ? (
        <p class="muted">{page.data ? "No items on this page." : "Loading…"}</p>
      ) : (
        <table class="nodes" aria-label="items">
          <thead>
            <tr>
              <th>#</th>
              <th>State</th>
              <th>Item</th>
              <th>Run or attempt</th>
              <th>Output</th>
            </tr>
          </thead>
          <tbody>
            {items.map((item) => (
              <tr key={item.index} data-index={item.index}>
                <td>{item.index}</td>
                <td>
                  <Badge state={item.state} />
                </td>
                <td>
                  <code class="item-preview">{preview(item.item)}</code>
                </td>
                <td>
                  {item.child_run_id !== null ? (
                    <a href={href({ page: "run", runId: item.child_run_id })}>{shortId(item.child_run_id)}</a>
                  ) : item.agent_type !== null && item.attempt > 0 ? (
                    `attempt ${item.attempt}`
                  ) : (
                    <span class="muted">-</span>
                  )}
                </td>
                <td>
                  <code class="item-preview">{item.error ? item.error.message : preview(item.output)}</code>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <nav class="pager" aria-label="item pages">
        <button type="button" disabled={pages.length <= 1} onClick={() => setPages(pages.slice(0, -1))}>
          Previous
        </button>
        <span class="muted">
          {items.length > 0 ? ` items ${first}–${first + items.length - 1} of ${counts.total} ` : " "}
        </span>
        <button type="button" disabled={next === null} onClick={() => next !== null && setPages([...pages, next])}>
          Next
        </button>
      </nav>
    </section>
  );
}

function preview(value: unknown): string {
  const t = text(value);
  return t.length > PREVIEW_CHARS ? `${t.slice(0, PREVIEW_CHARS - 1)}…` : t;
}
