/**
 * The small page test/react/use-run.test.ts builds (vite, React JSX) and drives in Chromium:
 * `useRun` for the run named by `?run=`, its state and each node's streamed text, and
 * `useReviews` with a button to read them again. `?token=` is the bearer token (a test's).
 */
import { createRoot } from "react-dom/client";
import { createClient } from "skein/client";
import { useReviews, useRun } from "skein/react";

const params = new URLSearchParams(location.search);
const token = params.get("token");
// Same origin: the test's server sends /v1 on to `skein serve`.
const client = createClient(token ? { token } : {});

function Run({ runId }: { runId: string }) {
  const { run, nodes, connected, error } = useRun(runId, { client });
  return (
    <section aria-label="run">
      <p data-testid="connection">{connected ? "connected" : "disconnected"}</p>
      <p data-testid="status">{run?.status ?? "loading"}</p>
      {error && <p role="alert">{error.message}</p>}
      <ul>
        {run?.nodes.map((node) => (
          <li key={node.node_id} aria-label={`node ${node.node_id}`}>
            <span data-testid={`state-${node.node_id}`}>{node.state}</span>
            <pre data-testid={`text-${node.node_id}`}>{nodes[node.node_id]?.text ?? ""}</pre>
          </li>
        ))}
      </ul>
    </section>
  );
}

function Reviews() {
  const { reviews, refresh } = useReviews({ client, intervalMs: 0 });
  return (
    <section aria-label="reviews">
      <button type="button" onClick={refresh}>
        Refresh reviews
      </button>
      <ul aria-label="pending reviews">
        {reviews.map((r) => (
          <li key={`${r.run_id}:${r.node_id}`}>{`${r.run_id}:${r.node_id}`}</li>
        ))}
      </ul>
    </section>
  );
}

function App() {
  const runId = params.get("run");
  return (
    <main>
      {runId && <Run runId={runId} />}
      <Reviews />
    </main>
  );
}

const root = document.getElementById("root");
if (root) createRoot(root).render(<App />);
