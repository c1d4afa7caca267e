/**
 * A visit's durable steps (DESIGN §14.1): what its attempts recorded with `task.step`, in order,
 * each with the attempt that recorded it, when, and its size; a later attempt gets them without
 * running them again. Read with GET /v1/runs/{id}/nodes/{node_id}/steps, again whenever the
 * visit's state or attempt changes (steps are recorded without events, so a running attempt's
 * newest may show only at its next change). Nothing is shown for a visit that recorded none.
 */
import { api } from "../api.js";
import { ErrorNote, JsonBlock, Time } from "../components.js";
import { useLoad } from "../hooks.js";
import type { Step, Visit } from "../types.js";

export function Steps(props: { visit: Visit }) {
  const { visit: v } = props;
  const path = `/v1/runs/${encodeURIComponent(v.run_id)}/nodes/${encodeURIComponent(v.node_id)}/steps`;
  const loaded = useLoad(
    () => api<{ steps: Step[] }>("GET", path),
    `${v.run_id}:${v.node_id}:${v.visit}:${v.state}:${v.attempt}`,
  );
  const steps = (loaded.data?.steps ?? []).filter((s) => s.visit === v.visit);
  if (loaded.error === undefined && steps.length === 0) return null;
  return (
    <section class="steps" aria-label="steps">
      <h4>Steps</h4>
      <ErrorNote error={loaded.error} prefix="Could not load the steps" />
      <table class="nodes" aria-label="durable steps">
        <thead>
          <tr>
            <th>Step</th>
            <th>Attempt</th>
            <th>Recorded</th>
            <th>Size</th>
            <th>Output</th>
          </tr>
        </thead>
        <tbody>
          {steps.map((s) => (
            <tr key={s.name} data-step={s.name}>
              <td>
                <code>{s.name}</code>
              </td>
              <td>{s.attempt}</td>
              <td>
                <Time at={s.recorded_at} />
              </td>
              <td>{s.size} B</td>
              <td>
                <JsonBlock value={s.output} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}
