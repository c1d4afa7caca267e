/**
 * The admin page: runs, the approvals inbox, workflows and schedules, over the public HTTP API. The page
 * signs in only when the API asks for a token (401); with no tokens configured it just works.
 */
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { ApiError, api, onUnauthorized, storedToken, storeToken } from "./api.js";
import { ErrorNote } from "./components.js";
import { useLiveEvents, useLoad } from "./hooks.js";
import { href, type Route, useRoute } from "./route.js";
import { ThemeSwitch } from "./theme.js";
import type { PendingReview } from "./types.js";
import { InboxPage } from "./views/inbox.js";
import { RunPage } from "./views/run.js";
import { RunsPage } from "./views/runs.js";
import { SchedulesPage } from "./views/schedules.js";
import { WorkflowsPage } from "./views/workflows.js";

function App() {
  const route = useRoute();
  const [signIn, setSignIn] = useState(false);
  // Bumped on sign-in and sign-out: every page mounts afresh and loads with the new token.
  const [session, setSession] = useState(0);
  useEffect(() => onUnauthorized(() => setSignIn(true)), []);

  if (signIn) {
    return (
      <SignIn
        onSignedIn={() => {
          setSignIn(false);
          setSession((s) => s + 1);
        }}
      />
    );
  }
  return (
    <div key={session}>
      <Nav
        route={route}
        onSignOut={() => {
          storeToken(null);
          setSession((s) => s + 1);
        }}
      />
      <main>
        <Page route={route} />
      </main>
    </div>
  );
}

function Page(props: { route: Route }) {
  const r = props.route;
  switch (r.page) {
    case "runs":
      return <RunsPage filter={r} />;
    case "run":
      return <RunPage runId={r.runId} node={r.node} />;
    case "inbox":
      return <InboxPage />;
    case "workflows":
      return <WorkflowsPage workflowId={r.workflowId} version={r.version} />;
    case "new-workflow":
      return <WorkflowsPage creating />;
    case "schedules":
      return <SchedulesPage scheduleId={r.scheduleId} />;
  }
}

function Nav(props: { route: Route; onSignOut: () => void }) {
  const page = props.route.page;
  const current = (pages: Route["page"][]) => (pages.includes(page) ? "page" : undefined);
  return (
    <header class="top">
      <h1>
        <a href={href({ page: "runs" })}>Skein</a>
      </h1>
      <nav aria-label="pages">
        <a href={href({ page: "runs" })} aria-current={current(["runs", "run"])}>
          Runs
        </a>
        <a href={href({ page: "inbox" })} aria-current={current(["inbox"])}>
          Inbox <InboxCount />
        </a>
        <a href={href({ page: "workflows" })} aria-current={current(["workflows", "new-workflow"])}>
          Workflows
        </a>
        <a href={href({ page: "schedules" })} aria-current={current(["schedules"])}>
          Schedules
        </a>
      </nav>
      <ThemeSwitch />
      {storedToken() !== null && (
        <button type="button" class="sign-out" onClick={props.onSignOut}>
          Sign out
        </button>
      )}
    </header>
  );
}

/** How many reviews wait, kept live. */
function InboxCount() {
  const reviews = useLoad(() => api<{ reviews: PendingReview[] }>("GET", "/v1/reviews"), "count");
  useLiveEvents((event) => {
    if (event === null || /^(review\.|run\.|node\.(failed|cancelled|skipped))/.test(event.type)) reviews.reload();
  });
  const count = reviews.data?.reviews.length ?? 0;
  return count > 0 ? <span class="count">{count}</span> : null;
}

function SignIn(props: { onSignedIn: () => void }) {
  const [token, setToken] = useState("");
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const submit = async () => {
    setBusy(true);
    setError(null);
    storeToken(token.trim());
    try {
      // Any page's first request would do: this one proves the token may read.
      await api("GET", "/v1/runs?limit=1");
      props.onSignedIn();
    } catch (e) {
      storeToken(null);
      setBusy(false);
      setError(
        e instanceof ApiError && e.status === 403
          ? new Error("This token may not use the admin page: sign in with an admin or reviewer token.")
          : e instanceof ApiError && e.status === 401
            ? new Error("That token is not valid.")
            : e,
      );
    }
  };
  return (
    <main class="sign-in">
      <h1>Skein</h1>
      <form
        aria-label="sign in"
        onSubmit={(e) => {
          e.preventDefault();
          void submit();
        }}
      >
        <p>This server wants a bearer token. It is kept for this tab only and sent in a header, never in a URL.</p>
        <label class="field">
          Token
          <input
            name="token"
            type="password"
            autocomplete="off"
            value={token}
            onInput={(e) => setToken(e.currentTarget.value)}
          />
        </label>
        <button type="submit" class="primary" disabled={busy || token.trim() === ""}>
          Sign in
        </button>
        <ErrorNote error={error} />
      </form>
    </main>
  );
}

const root = document.getElementById("app");
if (root) render(<App />, root);
