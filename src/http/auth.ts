/**
 * Bearer tokens with roles (DESIGN §10). Tokens come as a JSON list of `{ token, role, name,
 * agent_types, workflows }` (`skein serve --tokens FILE` or SKEIN_TOKENS); only their SHA-256 hashes are
 * kept, and a presented token is compared with every one of them in constant time. With no
 * tokens the API is open (and `skein serve` binds to loopback only).
 *
 * Roles: `admin` may do everything; `reviewer` may read and decide reviews as the identity its
 * token names; `agent` may only use the external-agent routes (/v1/tasks/*) for its agent types;
 * `metrics` may only scrape `GET /metrics` (a Prometheus server's token reads nothing else).
 * An admin or reviewer token may be scoped to workflows (scope.ts).
 */
import { createHash, timingSafeEqual } from "node:crypto";
import type { FastifyRequest } from "fastify";
import { z } from "zod";
import { issuesToProblems } from "../definition/zod-issues.js";
import { type Problem, ValidationError, withArticle } from "../errors.js";
import { HttpError } from "./errors.js";
import { type Principal, ROLES, type Role, WorkflowScope } from "./principal.js";
import { WORKFLOW_PATTERN } from "./scope.js";

/** Who may call a route: `public` (no token), or the roles allowed. */
export type Access = "public" | readonly Role[];
export const PUBLIC = "public" satisfies Access;
/** Reading workflows, runs, events and reviews. */
export const READERS: Access = ["admin", "reviewer"];
/** Deciding reviews (as the token's own name). */
export const REVIEWERS: Access = ["admin", "reviewer"];
/** Registering workflows, starting, cancelling and retrying runs. */
export const ADMINS: Access = ["admin"];
/** The external-agent protocol. */
export const AGENTS: Access = ["admin", "agent"];
/** Scraping the metrics (`GET /metrics`): counts across every workflow, so never a scoped token. */
export const SCRAPERS: Access = ["admin", "metrics"];

const MIN_TOKEN_LENGTH = 16;

const TokenEntrySchema = z
  .object({
    token: z.string().refine((t) => t.length >= MIN_TOKEN_LENGTH, {
      message: `must be at least ${MIN_TOKEN_LENGTH} characters: make one with openssl rand -hex 32`,
    }),
    role: z.enum(ROLES),
    name: z.string().min(1).max(200),
    agent_types: z.array(z.string().min(1)).min(1).optional(),
    workflows: z
      .array(
        z.string().regex(WORKFLOW_PATTERN, {
          message: "must be a workflow id or a pattern of one with * (1 to 64 of a-z, 0-9, '_', '-', '*')",
        }),
      )
      .min(1, { message: "must list at least one workflow id or pattern (leave workflows out for all workflows)" })
      .optional(),
  })
  .strict()
  .superRefine((entry, ctx) => {
    if (entry.role === "agent" && entry.workflows !== undefined) {
      // The external-agent routes claim by agent type, not by workflow: a scope there would not hold.
      ctx.addIssue({
        code: "custom",
        path: ["workflows"],
        message: "only admin and reviewer tokens may be scoped to workflows; an agent token is limited by agent_types",
      });
    }
    if (entry.role === "metrics" && (entry.workflows !== undefined || entry.agent_types !== undefined)) {
      // Metrics count every workflow and agent type at once: a scope there would not hold.
      ctx.addIssue({
        code: "custom",
        path: [entry.workflows !== undefined ? "workflows" : "agent_types"],
        message: "a metrics token reads every workflow's metrics: leave workflows and agent_types out",
      });
    }
    if (entry.role === "agent" && entry.agent_types === undefined) {
      ctx.addIssue({
        code: "custom",
        path: ["agent_types"],
        message: "an agent token must list the agent types it may claim",
      });
    }
  });

const TokenListSchema = z.array(TokenEntrySchema);

/** One configured token, as written in the tokens file. */
export type TokenEntry = z.input<typeof TokenEntrySchema>;

/**
 * Parses the text of a tokens file (or of SKEIN_TOKENS). `source` names it in messages.
 * @throws ValidationError listing every problem with its path, e.g. `[1].role`
 */
export function parseTokens(text: string, source: string): TokenEntry[] {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new ValidationError(`${source} is not JSON (${(e as Error).message})`);
  }
  return checkTokens(value, source);
}

/** @throws ValidationError listing every problem with its path */
export function checkTokens(value: unknown, source = "tokens"): TokenEntry[] {
  const parsed = TokenListSchema.safeParse(value, { reportInput: true });
  const problems = [...(parsed.success ? [] : issuesToProblems(parsed.error.issues)), ...duplicates(value)];
  if (!parsed.success || problems.length > 0) {
    throw new ValidationError(
      `${source} is not a valid token list (a JSON list of { "token", "role": "admin" | "agent" | "reviewer" | "metrics", "name", "agent_types", "workflows" })`,
      problems,
    );
  }
  return parsed.data;
}

/** Tokens given twice (checked on the raw list, so they are reported beside its other problems). */
function duplicates(value: unknown): Problem[] {
  if (!Array.isArray(value)) return [];
  const seen = new Map<string, number>();
  const problems: Problem[] = [];
  value.forEach((entry: unknown, i) => {
    const token = (entry as { token?: unknown } | null)?.token;
    if (typeof token !== "string") return;
    const first = seen.get(token);
    if (first === undefined) seen.set(token, i);
    else problems.push({ path: `[${i}].token`, message: `the same token as [${first}]: tokens must differ` });
  });
  return problems;
}

function sha256(token: string): Buffer {
  return createHash("sha256").update(token, "utf8").digest();
}

/** The configured tokens, held as hashes. */
export class Tokens {
  private readonly entries: { hash: Buffer; principal: Principal }[];

  /** @throws ValidationError for a bad list */
  constructor(list: readonly TokenEntry[]) {
    this.entries = checkTokens(list).map((e) => ({
      hash: sha256(e.token),
      principal: {
        role: e.role,
        name: e.name,
        agent_types: e.agent_types ?? null,
        workflows: e.workflows ? new WorkflowScope(e.workflows) : null,
      },
    }));
  }

  /** No tokens: the API is open. */
  get open(): boolean {
    return this.entries.length === 0;
  }

  /** The principal of a token, or null. Compares with every hash, in constant time each. */
  find(token: string): Principal | null {
    const hash = sha256(token);
    let found: Principal | null = null;
    for (const e of this.entries) {
      if (timingSafeEqual(hash, e.hash)) found = e.principal;
    }
    return found;
  }

  /**
   * Who may call: null when the API is open (anyone may), else the token's principal.
   * @throws HttpError 401 for a missing or unknown token, 403 for a role the route refuses
   */
  authorize(request: FastifyRequest, access: Access, scoped = false): Principal | null {
    if (access === "public" || this.open) return null;
    const header = request.headers.authorization;
    const match = header === undefined ? null : /^Bearer +(\S+) *$/i.exec(header);
    if (!match?.[1]) {
      throw new HttpError(401, "unauthorized", "missing bearer token: send the header Authorization: Bearer <token>");
    }
    const principal = this.find(match[1]);
    if (!principal) throw new HttpError(401, "unauthorized", "the bearer token is not valid");
    if (!access.includes(principal.role)) {
      throw new HttpError(
        403,
        "forbidden",
        `${withArticle(principal.role)} token may not ${request.method} ${request.routeOptions.url ?? request.url} (allowed: ${access.join(", ")})`,
      );
    }
    if (principal.workflows && !scoped) {
      throw new HttpError(
        403,
        "forbidden",
        `a token scoped to workflows (${principal.workflows.patterns.join(", ")}) may not ${request.method} ${request.routeOptions.url ?? request.url}: use a token without workflows`,
      );
    }
    return principal;
  }
}
