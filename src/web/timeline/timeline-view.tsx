/**
 * The run's timeline (Gantt) as SVG made by Preact: a row per visit, a bar per attempt (a failed
 * one red, a retried one red and dashed), a person's review and a wait outlined and hatched, a
 * child run's attempt with a link to that run, a map's attempt with its items' progress. Every
 * name is a text node; geometry is SVG attributes and colours are classes (timeline.css), so the
 * strict CSP (no inline styles) holds. A bar is a button: a click or Enter selects its node.
 */
import { duration } from "../format.js";
import { href } from "../route.js";
import type { MapCounts } from "../types.js";
import { type Bar, buildTimeline, type Row, type Timeline } from "./model.js";
import "./timeline.css";
import type { RunEvent, Visit } from "../types.js";

// Sized to the run page's left column (under the graph) at a laptop's width; narrower, it scales down.
const LABEL_WIDTH = 150;
const CHART_WIDTH = 540;
const ROW_HEIGHT = 26;
const BAR_HEIGHT = 16;
const AXIS_HEIGHT = 22;
const LABEL_CHARS = 19;
/** The narrowest a bar is drawn, so an instant attempt can still be seen and clicked. */
const MIN_BAR = 3;

const KIND_WORDS: Readonly<Record<Bar["kind"], string>> = {
  attempt: "attempt",
  child: "child run",
  map: "map items",
  review: "review",
  wait: "wait",
};

/** The "Timeline" section of the run page: the chart and what its marks mean. */
export function RunTimeline(props: Parameters<typeof TimelineView>[0]) {
  return (
    <section class="timeline-panel" aria-labelledby="timeline-heading">
      <h3 id="timeline-heading">Timeline</h3>
      {/* A long loop has a row per visit, thousands of them: the chart scrolls in its own box, not the page. */}
      <div class="timeline-scroll">
        <TimelineView {...props} />
      </div>
      <p class="timeline-legend muted">
        A bar per attempt, from its start to its end (or now). Red: failed (dashed: retried). Hatched: waiting for a
        timer, an event or a review. Thick edge: a child run or a map's items. Select a bar for its node.
      </p>
    </section>
  );
}

export function TimelineView(props: {
  events: readonly RunEvent[];
  visits: readonly Visit[];
  runStart: number;
  runEnd: number | null;
  now: number;
  selected?: string | undefined;
  onSelect: (nodeId: string) => void;
}) {
  const timeline = buildTimeline(props);
  if (timeline.rows.length === 0) return <p class="muted">Nothing has run yet.</p>;
  const width = LABEL_WIDTH + CHART_WIDTH + 20;
  const height = AXIS_HEIGHT + timeline.rows.length * ROW_HEIGHT + 4;
  const x = (at: number) => LABEL_WIDTH + ((at - timeline.start) / (timeline.end - timeline.start)) * CHART_WIDTH;
  return (
    // biome-ignore lint/a11y/useSemanticElements: an <svg> cannot be a <fieldset>; the group holds the bars (buttons).
    <svg
      class="timeline"
      viewBox={`0 0 ${width} ${height}`}
      width={width}
      height={height}
      role="group"
      aria-label="run timeline"
    >
      <defs>
        <pattern id="timeline-hatch" patternUnits="userSpaceOnUse" width="6" height="6" patternTransform="rotate(45)">
          <line x1="0" y1="0" x2="0" y2="6" class="hatch-line" />
        </pattern>
      </defs>
      <Axis timeline={timeline} x={x} height={height} />
      {timeline.rows.map((row, i) => (
        <TimelineRow
          key={`${row.nodeId}#${row.visit}`}
          row={row}
          y={AXIS_HEIGHT + i * ROW_HEIGHT}
          x={x}
          now={props.now}
          selected={row.nodeId === props.selected}
          onSelect={props.onSelect}
        />
      ))}
    </svg>
  );
}

function Axis(props: { timeline: Timeline; x: (at: number) => number; height: number }) {
  return (
    // biome-ignore lint/a11y/noAriaHiddenOnFocusable: nothing in the axis is focusable; its ticks would only be noise to a screen reader.
    <g class="timeline-axis" aria-hidden="true">
      {props.timeline.ticks.map((t) => (
        <g key={t.at} class="tick">
          <line x1={props.x(t.at)} x2={props.x(t.at)} y1={AXIS_HEIGHT - 4} y2={props.height} />
          <text x={props.x(t.at)} y={AXIS_HEIGHT - 8} text-anchor="middle">
            {t.label}
          </text>
        </g>
      ))}
    </g>
  );
}

function TimelineRow(props: {
  row: Row;
  y: number;
  x: (at: number) => number;
  now: number;
  selected: boolean;
  onSelect: (nodeId: string) => void;
}) {
  const { row, y, x, now } = props;
  const top = y + (ROW_HEIGHT - BAR_HEIGHT) / 2;
  const last = row.bars[row.bars.length - 1];
  return (
    <g
      class={`timeline-row${props.selected ? " selected" : ""}`}
      data-node-id={row.nodeId}
      data-visit={row.visit}
      data-state={row.state ?? "none"}
    >
      <rect class="row-band" x={0} y={y} width={LABEL_WIDTH + CHART_WIDTH + 20} height={ROW_HEIGHT} />
      <text x={6} y={y + ROW_HEIGHT / 2 + 4} class="row-label">
        <title>{`${row.label}${row.agentType ? ` (${row.agentType})` : ""}`}</title>
        {clip(row.label, LABEL_CHARS)}
      </text>
      {row.bars.length === 0 && (
        <text x={LABEL_WIDTH + 4} y={y + ROW_HEIGHT / 2 + 4} class="row-note">
          {(row.state ?? "").toLowerCase()}
        </text>
      )}
      {row.bars.map((bar) => {
        const start = x(bar.start);
        const barWidth = Math.max(MIN_BAR, x(bar.end ?? now) - start);
        const label = barLabel(row, bar, now);
        const select = () => props.onSelect(row.nodeId);
        return (
          // biome-ignore lint/a11y/useSemanticElements: an SVG group cannot be a <button>; role and keys make it one.
          <g
            key={`${bar.attempt}:${bar.start}`}
            class={`timeline-bar bar-${bar.kind} outcome-${bar.outcome}`}
            data-attempt={bar.attempt}
            data-kind={bar.kind}
            data-outcome={bar.outcome}
            role="button"
            // Lower case: Preact sets an SVG element's props as attributes, and SVG's is `tabindex`.
            tabindex={0}
            aria-label={label}
            onClick={select}
            onKeyDown={(e) => {
              if (e.key === "Enter" || e.key === " ") {
                e.preventDefault();
                select();
              }
            }}
          >
            <title>{label}</title>
            <rect x={round(start)} y={top} width={round(barWidth)} height={BAR_HEIGHT} rx="2" />
            {(bar.kind === "review" || bar.kind === "wait") && (
              <rect class="hatch" x={round(start)} y={top} width={round(barWidth)} height={BAR_HEIGHT} />
            )}
          </g>
        );
      })}
      {row.items && last && (
        <MapProgressBar counts={row.items} x={x(last.end ?? now) + 6} y={y + ROW_HEIGHT / 2} row={row} />
      )}
      {row.bars
        .filter((b) => b.childRunId !== undefined)
        .slice(-1)
        .map((b) => (
          <a
            key="child"
            class="child-link"
            href={href({ page: "run", runId: b.childRunId ?? "" })}
            aria-label={`child run ${b.childRunId} of ${row.label}`}
          >
            <text x={Math.min(x(b.end ?? now) + 6, LABEL_WIDTH + CHART_WIDTH - 60)} y={y + ROW_HEIGHT / 2 + 4}>
              child run ↗
            </text>
          </a>
        ))}
    </g>
  );
}

const MAP_BAR_WIDTH = 100;
const MAP_BAR_HEIGHT = 6;

/** A map's items after its bar: succeeded, failed, running, out of the total (the track), then `ended/total`. */
function MapProgressBar(props: { counts: MapCounts; x: number; y: number; row: Row }) {
  const { total, succeeded, failed, running, cancelled } = props.counts;
  const ended = succeeded + failed + cancelled;
  const share = (n: number) => (total > 0 ? (MAP_BAR_WIDTH * n) / total : 0);
  const left = round(Math.min(props.x, LABEL_WIDTH + CHART_WIDTH - MAP_BAR_WIDTH - 30));
  const top = props.y - MAP_BAR_HEIGHT / 2;
  return (
    // biome-ignore lint/a11y/noInteractiveElementToNoninteractiveRole: this <g> is not interactive; progressbar is its only role.
    <g
      class="timeline-map"
      role="progressbar"
      aria-label={`items of ${props.row.label}: ${succeeded} succeeded, ${failed} failed, ${running} running, of ${total}`}
      aria-valuemin={0}
      aria-valuemax={total}
      aria-valuenow={ended}
      data-total={total}
      data-succeeded={succeeded}
      data-failed={failed}
      data-running={running}
    >
      <rect class="map-track" x={left} y={top} width={MAP_BAR_WIDTH} height={MAP_BAR_HEIGHT} />
      <rect class="map-succeeded" x={left} y={top} width={round(share(succeeded))} height={MAP_BAR_HEIGHT} />
      <rect
        class="map-failed"
        x={round(left + share(succeeded))}
        y={top}
        width={round(share(failed))}
        height={MAP_BAR_HEIGHT}
      />
      <rect
        class="map-running"
        x={round(left + share(succeeded + failed))}
        y={top}
        width={round(share(running))}
        height={MAP_BAR_HEIGHT}
      />
      <text x={left + MAP_BAR_WIDTH + 6} y={props.y + 4}>{`${ended}/${total}`}</text>
    </g>
  );
}

function barLabel(row: Row, bar: Bar, now: number): string {
  const took = duration((bar.end ?? now) - bar.start);
  const what = `${row.label}, ${KIND_WORDS[bar.kind]} ${bar.attempt}`;
  const note = bar.note ? ` (${bar.note})` : "";
  return `${what}${note}: ${bar.outcome}, ${took}`;
}

function round(n: number): number {
  return Math.round(n * 10) / 10;
}

function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
