/**
 * Schedules: the list (id, workflow, cron and time zone, next fire, paused) beside one schedule:
 * its next 5 fire times, its last runs, and pause or resume (the server's answer shown). Times
 * are the browser's local ones; the cron expression is read in the schedule's time zone.
 */
import { useState } from "preact/hooks";
import { api, query } from "../api.js";
import { Badge, ErrorNote, JsonBlock, Time } from "../components.js";
import { shortId, time } from "../format.js";
import { useLiveEvents, useLoad } from "../hooks.js";
import { href } from "../route.js";
import type { Run, Schedule, ScheduleWithTimes } from "../types.js";

const LAST_RUNS = 5;

export function SchedulesPage(props: { scheduleId?: string | undefined }) {
  const list = useLoad(() => api<{ schedules: Schedule[] }>("GET", "/v1/schedules"), "schedules");
  // A firing starts a run and moves the schedule's next fire time: reload on run starts and ends.
  useLiveEvents((event) => {
    if (event === null || event.type === "run.started") list.reload();
  });
  const schedules = list.data?.schedules ?? [];
  return (
    <section class="schedules-page">
      <header class="page-header">
        <h2>Schedules</h2>
      </header>
      <ErrorNote error={list.error} prefix="Could not load the schedules" />
      {list.data && schedules.length === 0 && (
        <p class="muted">{"No schedules yet: create one with skein schedules put <file> or PUT /v1/schedules/<id>."}</p>
      )}
      {schedules.length > 0 && (
        <table class="schedules" aria-label="schedules">
          <thead>
            <tr>
              <th>Schedule</th>
              <th>Workflow</th>
              <th>Cron</th>
              <th>Next fire</th>
              <th>State</th>
            </tr>
          </thead>
          <tbody>
            {schedules.map((s) => (
              <tr
                key={s.schedule_id}
                data-schedule-id={s.schedule_id}
                class={s.schedule_id === props.scheduleId ? "selected" : ""}
              >
                <td>
                  <a href={href({ page: "schedules", scheduleId: s.schedule_id })}>{s.schedule_id}</a>
                </td>
                <td>
                  <a href={href({ page: "workflows", workflowId: s.workflow_id })}>{s.workflow_id}</a>
                  {s.version !== null && <span class="muted"> v{s.version}</span>}
                </td>
                <td>
                  <code>{s.cron}</code> <span class="muted">{s.timezone}</span>
                </td>
                <td class="next-fire">{s.next_fire_at === null ? "-" : <Time at={s.next_fire_at} />}</td>
                <td>{s.paused ? <span class="badge state-paused">paused</span> : "active"}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {props.scheduleId !== undefined && (
        <ScheduleDetail key={props.scheduleId} id={props.scheduleId} onChanged={list.reload} />
      )}
    </section>
  );
}

function ScheduleDetail(props: { id: string; onChanged: () => void }) {
  const path = `/v1/schedules/${encodeURIComponent(props.id)}`;
  const schedule = useLoad(() => api<ScheduleWithTimes>("GET", path), props.id);
  const runs = useLoad(
    () => api<{ runs: Run[] }>("GET", `/v1/runs${query({ schedule_id: props.id, limit: LAST_RUNS })}`),
    props.id,
  );
  useLiveEvents((event) => {
    if (event === null || event.type.startsWith("run.")) {
      schedule.reload();
      runs.reload();
    }
  });
  const [answer, setAnswer] = useState<Schedule | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const s = schedule.data;
  if (!s) return <ErrorNote error={schedule.error} prefix="Could not load the schedule" />;

  const act = async (action: "pause" | "resume") => {
    setBusy(true);
    setError(null);
    setAnswer(null);
    try {
      const { schedule: changed } = await api<{ schedule: Schedule }>("POST", `${path}/${action}`);
      setAnswer(changed);
      schedule.reload();
      props.onChanged();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return (
    <section class="schedule-detail" aria-label={`schedule ${s.schedule_id}`}>
      <h3>
        {s.schedule_id}{" "}
        {s.paused ? (
          <button type="button" class="primary" disabled={busy} onClick={() => void act("resume")}>
            Resume
          </button>
        ) : (
          <button type="button" disabled={busy} onClick={() => void act("pause")}>
            Pause
          </button>
        )}
      </h3>
      {answer && (
        <p role="status" class="saved">
          {answer.paused
            ? `Paused ${answer.schedule_id}: no slot fires until it is resumed.`
            : `Resumed ${answer.schedule_id}: the next slot fires at ${answer.next_fire_at === null ? "-" : time(answer.next_fire_at)}.`}
        </p>
      )}
      <ErrorNote error={error} prefix="Not changed" />
      <div class="two-columns">
        <div>
          <dl class="facts">
            <dt>Workflow</dt>
            <dd>
              <a href={href({ page: "workflows", workflowId: s.workflow_id })}>{s.workflow_id}</a>{" "}
              <span class="muted">{s.version === null ? "latest version" : `v${s.version}`}</span>
            </dd>
            <dt>Cron</dt>
            <dd>
              <code>{s.cron}</code> in {s.timezone}
            </dd>
            <dt>Overlap</dt>
            <dd>{s.overlap}</dd>
            <dt>Catch-up</dt>
            <dd>{s.catchup === "all" ? `all (at most ${s.catchup_limit})` : s.catchup}</dd>
            <dt>Last slot</dt>
            <dd>{s.last_slot_at === null ? "-" : <Time at={s.last_slot_at} />}</dd>
            <dt>Input</dt>
            <dd>
              <JsonBlock value={s.input} />
            </dd>
          </dl>
          <h4>Next fire times</h4>
          {s.next_fire_times.length === 0 ? (
            <p class="muted">None while paused.</p>
          ) : (
            <ol class="fire-times" aria-label="next fire times">
              {s.next_fire_times.map((t) => (
                <li key={t}>
                  <Time at={t} />
                </li>
              ))}
            </ol>
          )}
        </div>
        <div>
          <h4>Last runs</h4>
          <ErrorNote error={runs.error} prefix="Could not load its runs" />
          {runs.data && runs.data.runs.length === 0 && <p class="muted">No runs yet.</p>}
          {runs.data && runs.data.runs.length > 0 && (
            <table aria-label="last runs">
              <tbody>
                {runs.data.runs.map((run) => (
                  <tr key={run.run_id} data-run-id={run.run_id}>
                    <td>
                      <a href={href({ page: "run", runId: run.run_id })} title={run.run_id}>
                        <code>{shortId(run.run_id)}</code>
                      </a>
                    </td>
                    <td>
                      <Badge state={run.status} />
                    </td>
                    <td>
                      <Time at={run.created_at} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </div>
      </div>
    </section>
  );
}
