/**
 * Pages are addressed by the URL's hash (`#/runs/<id>`), so the server serves one file and a
 * link to a run or a review can be shared. Run ids, node ids and filters may appear here;
 * tokens never do.
 */
import { useEffect, useState } from "preact/hooks";

export type Route =
  | ({ page: "runs" } & RunsFilter)
  | { page: "run"; runId: string; node?: string }
  | { page: "inbox" }
  | { page: "workflows"; workflowId?: string; version?: number }
  | { page: "new-workflow" }
  | { page: "schedules"; scheduleId?: string };

/**
 * The runs list's filters as the hash keeps them, so a reload or a shared link shows the same
 * list: `id` a part of a run id, `q` text in input or output, `tag` a run tag as `name:value`,
 * `from`/`to` datetime-local values.
 */
export interface RunsFilter {
  status?: string;
  workflow?: string;
  id?: string;
  q?: string;
  tag?: string;
  from?: string;
  to?: string;
}

const RUNS_FILTER_KEYS = ["status", "workflow", "id", "q", "tag", "from", "to"] as const;

export function parseRoute(hash: string): Route {
  const [path = "", search = ""] = hash.replace(/^#/, "").split("?");
  const params = new URLSearchParams(search);
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  const param = (name: string) => params.get(name) ?? undefined;
  switch (parts[0]) {
    case "runs":
      if (parts[1]) return { page: "run", runId: parts[1], ...optional("node", param("node")) };
      return {
        page: "runs",
        ...Object.assign({}, ...RUNS_FILTER_KEYS.map((k) => optional(k, param(k)))),
      };
    case "inbox":
      return { page: "inbox" };
    case "workflows": {
      const version = Number(param("version"));
      return {
        page: "workflows",
        ...optional("workflowId", parts[1]),
        ...(Number.isInteger(version) && version > 0 ? { version } : {}),
      };
    }
    case "new-workflow":
      return { page: "new-workflow" };
    case "schedules":
      return { page: "schedules", ...optional("scheduleId", parts[1]) };
    default:
      return { page: "runs" };
  }
}

export function href(route: Route): string {
  const withQuery = (path: string, params: Record<string, string | number | undefined>) => {
    const search = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== "") search.set(k, String(v));
    const text = search.toString();
    return `#/${path}${text ? `?${text}` : ""}`;
  };
  switch (route.page) {
    case "runs":
      return withQuery("runs", Object.fromEntries(RUNS_FILTER_KEYS.map((k) => [k, route[k]])));
    case "run":
      return withQuery(`runs/${encodeURIComponent(route.runId)}`, { node: route.node });
    case "inbox":
      return "#/inbox";
    case "workflows":
      return route.workflowId === undefined
        ? "#/workflows"
        : withQuery(`workflows/${encodeURIComponent(route.workflowId)}`, { version: route.version });
    case "new-workflow":
      return "#/new-workflow";
    case "schedules":
      return route.scheduleId === undefined ? "#/schedules" : `#/schedules/${encodeURIComponent(route.scheduleId)}`;
  }
}

export function navigate(route: Route): void {
  location.hash = href(route);
}

/** The current route, re-rendered when the hash changes. */
export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.hash));
  useEffect(() => {
    const onChange = () => setRoute(parseRoute(location.hash));
    window.addEventListener("hashchange", onChange);
    return () => window.removeEventListener("hashchange", onChange);
  }, []);
  return route;
}

function optional<K extends string>(key: K, value: string | undefined): { [P in K]?: string } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: string };
}
