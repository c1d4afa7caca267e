/**
 * An agent node's conversation (DESIGN §14.2) in its current visit: the instructions and input,
 * then each model turn (its text, its tool calls as `name(arguments)`, what it cost) and each tool
 * call's result (its tool, marked when it failed), as the loop recorded them. Read with GET
 * /v1/runs/{id}/nodes/{node_id}/messages, every page, again whenever the visit's state or
 * attempt changes and when a progress event starts a new turn (the turns and calls before it are
 * recorded by then; messages are recorded without events). While the node runs, the model's
 * text so far (its `node.progress`, `{ turn, content }`) shows after the recorded messages.
 */
import { useEffect, useRef } from "preact/hooks";
import { api, query } from "../api.js";
import { ErrorNote, LiveText, progressText } from "../components.js";
import { useLoad } from "../hooks.js";
import type { Message, MessagePage, ProgressEvent, Visit } from "../types.js";
import "./conversation.css";

/** Messages a request asks for: the API's most. */
const PAGE = 1000;

export function Conversation(props: { visit: Visit; progress?: ProgressEvent | undefined }) {
  const { visit: v } = props;
  const path = `/v1/runs/${encodeURIComponent(v.run_id)}/nodes/${encodeURIComponent(v.node_id)}/messages`;
  const loaded = useLoad(async () => {
    const messages: Message[] = [];
    for (let after = -1; ; ) {
      const page = await api<MessagePage>("GET", `${path}${query({ visit: v.visit, after, limit: PAGE })}`);
      messages.push(...page.messages);
      if (page.next_after === null) return messages;
      after = page.next_after;
    }
  }, `${v.run_id}:${v.node_id}:${v.visit}:${v.state}:${v.attempt}`);

  const live = props.progress?.data.progress as { turn?: unknown } | undefined;
  const turn = typeof live?.turn === "number" ? live.turn : null;
  const seen = useRef(turn);
  useEffect(() => {
    // A new turn streams: the turn and tool calls before it are recorded.
    if (seen.current === turn) return;
    seen.current = turn;
    if (turn !== null) loaded.reload();
  }, [turn, loaded.reload]);

  const messages = loaded.data ?? [];
  const recordedTurn = messages.reduce((n, m) => (m.role === "assistant" ? Math.max(n, m.turn ?? 0) : n), 0);
  // The unrecorded turn's text shows while the visit runs: once it ended, the conversation is what was recorded.
  const streaming =
    v.state === "RUNNING" && props.progress && turn !== null && turn > recordedTurn ? props.progress : undefined;
  // A tool call waiting for a person: the visit is IN_REVIEW with the request as its output (the inbox decides it).
  const waiting =
    v.state === "IN_REVIEW"
      ? ((v.output as { approval?: { tool: string; arguments: unknown; assignees?: string[] } } | null)?.approval ??
        null)
      : null;
  return (
    <section class="conversation" aria-label="conversation">
      <h4>Conversation</h4>
      <ErrorNote error={loaded.error} prefix="Could not load the conversation" />
      {loaded.data === undefined && loaded.error === undefined && <p class="muted">Loading…</p>}
      {loaded.data !== undefined && messages.length === 0 && !streaming && !waiting && (
        <p class="muted">No messages yet.</p>
      )}
      {(messages.length > 0 || streaming || waiting) && (
        <ol class="messages" aria-label="messages">
          {messages.map((m) => (
            <MessageItem key={m.seq} message={m} />
          ))}
          {waiting && (
            <li class="message" data-role="tool" data-waiting="true">
              <p class="message-head">
                <strong>tool</strong> <code class="tool-name">{waiting.tool}</code>{" "}
                <span class="approval">waiting for approval</span>
                {waiting.assignees && <span class="muted"> by {waiting.assignees.join(", ")}</span>}
              </p>
              <pre class="message-content">{JSON.stringify(waiting.arguments, null, 2)}</pre>
            </li>
          )}
          {streaming && (
            <li class="message" data-role="assistant" data-streaming="true">
              <p class="message-head">
                <strong>assistant</strong> <span class="muted">turn {turn}, writing…</span>
              </p>
              <LiveText text={progressText(streaming.data.progress)} label="model's reply so far" />
            </li>
          )}
        </ol>
      )}
    </section>
  );
}

function MessageItem(props: { message: Message }) {
  const m = props.message;
  const calls = m.tool_calls ?? [];
  const text = contentText(m.content);
  return (
    <li class={`message${m.error ? " failed" : ""}`} data-role={m.role} data-seq={m.seq}>
      <p class="message-head">
        <strong>{m.role}</strong>
        {m.role === "tool" && m.name !== undefined && (
          <>
            {" "}
            <code class="tool-name">{m.name}</code>
          </>
        )}
        {m.approval && <span class="approval"> {approvalText(m.approval)}</span>}
        {m.error && !m.approval && <span class="message-error"> error</span>}
        {m.turn !== undefined && <span class="muted"> turn {m.turn}</span>}
        {m.usage && <span class="usage muted"> ({usageText(m.usage)})</span>}
      </p>
      {text !== "" && <pre class="message-content">{text}</pre>}
      {calls.length > 0 && (
        <ul class="tool-calls" aria-label="tool calls">
          {calls.map((c) => (
            <li key={c.id}>
              <code>
                {c.function.name}({c.function.arguments})
              </code>
            </li>
          ))}
        </ul>
      )}
    </li>
  );
}

/** A message's content as text: a string whole, anything else (content parts) as JSON. */
function contentText(content: unknown): string {
  if (content === null || content === undefined) return "";
  return typeof content === "string" ? content : JSON.stringify(content, null, 2);
}

function approvalText(a: NonNullable<Message["approval"]>): string {
  if (a.decision === "approve") return `approved by ${a.by ?? "a reviewer"}`;
  if (a.decision === "timeout") return "not approved in time";
  return `rejected by ${a.by ?? "a reviewer"}`;
}

function usageText(usage: NonNullable<Message["usage"]>): string {
  return `tokens in ${usage.tokens_in ?? 0}, out ${usage.tokens_out ?? 0}`;
}
