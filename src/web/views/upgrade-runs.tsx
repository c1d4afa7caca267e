/**
 * A workflow version's "Upgrade runs" (DESIGN §16): a dry run of POST /v1/workflows/{id}/migrate
 * lists the running runs of older versions that would move to this version and why the others
 * would not; then moving them, and what moved.
 */
import { useState } from "preact/hooks";
import { api } from "../api.js";
import { ErrorNote } from "../components.js";
import { href } from "../route.js";
import type { MigrateAnswer } from "../types.js";

export function UpgradeRuns(props: { workflowId: string; version: number }) {
  const [plan, setPlan] = useState<MigrateAnswer | null>(null);
  const [done, setDone] = useState<MigrateAnswer | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const migrate = async (dry_run: boolean) => {
    setBusy(true);
    setError(null);
    try {
      const path = `/v1/workflows/${encodeURIComponent(props.workflowId)}/migrate`;
      const answer = await api<MigrateAnswer>("POST", path, { to_version: props.version, dry_run });
      if (dry_run) {
        setPlan(answer);
        setDone(null);
      } else {
        setDone(answer);
        setPlan(null);
      }
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const shown = done ?? plan;
  return (
    <div class="upgrade-runs">
      <p class="muted">
        Move the running runs of older versions to version {props.version}: those whose visited nodes and fired edges it
        keeps, and with no attempt running.
      </p>
      <button type="button" disabled={busy} onClick={() => migrate(true)}>
        Check runs
      </button>
      <ErrorNote error={error} prefix="Could not upgrade the runs" />
      {shown && (
        <section aria-label="upgrade">
          <p role="status">
            {done
              ? `Moved ${count(done.moved.length)} to version ${props.version}.`
              : `${count(shown.moved.length)} would move to version ${props.version}.`}
          </p>
          {shown.moved.length > 0 && (
            <ul aria-label={done ? "moved" : "would move"}>
              {shown.moved.map((m) => (
                <li key={m.run_id}>
                  <a href={href({ page: "run", runId: m.run_id })}>{m.run_id}</a> from version {m.from_version}
                </li>
              ))}
            </ul>
          )}
          {shown.incompatible.length > 0 && (
            <>
              <p>{count(shown.incompatible.length)} cannot move:</p>
              <ul aria-label="incompatible">
                {shown.incompatible.map((r) => (
                  <li key={r.run_id}>
                    <a href={href({ page: "run", runId: r.run_id })}>{r.run_id}</a> (version {r.from_version})
                    <ul aria-label="reasons">
                      {r.reasons.map((reason) => (
                        <li key={reason}>{reason}</li>
                      ))}
                    </ul>
                  </li>
                ))}
              </ul>
            </>
          )}
          {plan && plan.moved.length > 0 && (
            <button type="button" disabled={busy} onClick={() => migrate(false)}>
              Move {count(plan.moved.length)}
            </button>
          )}
        </section>
      )}
    </div>
  );
}

function count(n: number): string {
  return `${n} run${n === 1 ? "" : "s"}`;
}
