/**
 * What the docs tests read from a Markdown file: its links, its heading anchors and its code blocks,
 * with line numbers. Parsed with `marked` (its lexer gives GitHub-flavoured tokens, so a link in a
 * code span or a code block is not taken for one) and anchors made with `github-slugger`, the
 * slugs GitHub itself gives headings.
 */
import { readFileSync } from "node:fs";
import GithubSlugger from "github-slugger";
import { marked, type Token, type Tokens } from "marked";

export interface Link {
  href: string;
  line: number;
}

export interface CodeBlock {
  lang: string;
  code: string;
  /** Line of the opening fence. */
  line: number;
  /** The HTML comment right before the fence, if any (the block's directives). */
  comment: string | null;
}

export interface MarkdownFile {
  links: Link[];
  anchors: Set<string>;
  blocks: CodeBlock[];
}

export function readMarkdown(file: string): MarkdownFile {
  const source = readFileSync(file, "utf8");
  const tokens = marked.lexer(source, { gfm: true });
  const lineAt = lineFinder(source);
  const slugger = new GithubSlugger();
  const links: Link[] = [];
  const anchors = new Set<string>();
  const blocks: CodeBlock[] = [];
  let previous: Token | null = null;
  const cursor = { at: 0 };
  const walk = (list: Token[]) => {
    for (const token of list) {
      const line = lineAt(token.raw, cursor);
      if (token.type === "heading") anchors.add(slugger.slug(plainText((token as Tokens.Heading).tokens)));
      if (token.type === "link" || token.type === "image") {
        links.push({ href: (token as Tokens.Link).href, line });
      }
      if (token.type === "html") {
        // <a href> and <img src> written as HTML, and <a id> / <a name> anchors.
        for (const m of token.raw.matchAll(/<(?:a|img)\s[^>]*?\b(href|src|id|name)="([^"]*)"/g)) {
          if (m[1] === "id" || m[1] === "name") anchors.add(m[2] ?? "");
          else links.push({ href: m[2] ?? "", line });
        }
      }
      if (token.type === "code") {
        const code = token as Tokens.Code;
        const comment = previous?.type === "html" ? previous.raw.trim() : null;
        blocks.push({ lang: (code.lang ?? "").trim(), code: code.text, line, comment });
      }
      if (token.type !== "space") previous = token;
      const children = childTokens(token);
      if (children.length > 0 && token.type !== "code") {
        const saved = cursor.at;
        cursor.at = Math.max(0, saved - token.raw.length);
        walk(children);
        cursor.at = saved;
      }
    }
  };
  walk(tokens);
  return { links, anchors, blocks };
}

/** Nested tokens of lists, list items, blockquotes, paragraphs, tables and inline containers. */
function childTokens(token: Token): Token[] {
  const t = token as Token & {
    tokens?: Token[];
    items?: Token[];
    header?: Tokens.TableCell[];
    rows?: Tokens.TableCell[][];
  };
  const out: Token[] = [];
  if (t.items) out.push(...t.items);
  if (t.header) for (const c of t.header) out.push(...c.tokens);
  if (t.rows) for (const r of t.rows) for (const c of r) out.push(...c.tokens);
  if (t.tokens) out.push(...t.tokens);
  return out;
}

/** The plain text of a heading's inline tokens, as GitHub slugs it (code spans keep their text). */
function plainText(tokens: Token[]): string {
  return tokens
    .map((t) => {
      const nested = (t as { tokens?: Token[] }).tokens;
      if (nested && nested.length > 0) return plainText(nested);
      return (t as { text?: string }).text ?? "";
    })
    .join("");
}

/**
 * The 1-based line where `raw` next occurs at or after the cursor (tokens come in document order,
 * so the cursor moves forward; a nested token searches from its parent's start).
 */
function lineFinder(source: string): (raw: string, cursor: { at: number }) => number {
  return (raw, cursor) => {
    const found = raw === "" ? -1 : source.indexOf(raw, cursor.at);
    const at = found >= 0 ? found : cursor.at;
    if (found >= 0) cursor.at = found + raw.length;
    let line = 1;
    for (let i = 0; i < at; i++) if (source.charCodeAt(i) === 10) line++;
    return line;
  };
}
