/**
 * The shop's help center as an MCP server on stdio, built on the official SDK (`McpServer`,
 * `StdioServerTransport`). Its one tool, `search_articles` `{ query }`, answers the text of the
 * article that best matches the query (the most words in common), or says none does.
 *
 * The engine starts it as a child process (main.ts: the engine option
 * `mcp: { servers: { helpcenter: { command, args } } }`); to try it alone:
 *   node --import tsx examples/support-agent/helpcenter-server.ts
 * then write MCP's JSON-RPC messages to its stdin, one a line. Its stdout is the protocol: it
 * logs nothing there.
 */
import { pathToFileURL } from "node:url";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

export interface Article {
  title: string;
  body: string;
  /** Words a query may use for it, besides those of its title and body. */
  keywords: string[];
}

export const articles: Article[] = [
  {
    title: "Returns",
    body: "You can return unworn items within 30 days of delivery. Start a return from your order page, print the free label and drop the parcel at any post office.",
    keywords: ["return", "returns", "returning", "send", "back", "exchange", "label"],
  },
  {
    title: "Shipping times",
    body: "Orders ship within 2 working days. Standard delivery takes 3 to 5 working days; express takes 1 to 2. You get a tracking link by email when your order ships.",
    keywords: ["shipping", "ship", "ships", "shipped", "delivery", "deliver", "tracking", "track", "when", "arrive"],
  },
  {
    title: "Refunds",
    body: "Once we receive your return, we refund the original payment method within 5 working days. Shipping costs are refunded when the whole order is returned.",
    keywords: ["refund", "refunds", "refunded", "money", "payment", "reimburse"],
  },
  {
    title: "Changing or cancelling an order",
    body: "You can change or cancel an order until it ships, from your order page. Once it has shipped, return it instead.",
    keywords: ["cancel", "cancelling", "change", "modify", "address"],
  },
];

const wordsOf = (text: string) => text.toLowerCase().match(/[a-z0-9]+/g) ?? [];

/** The article with the most words in common with the query (keywords count double), or null. */
export function bestArticle(query: string): Article | null {
  const asked = new Set(wordsOf(query));
  let best: Article | null = null;
  let bestScore = 0;
  for (const article of articles) {
    const keywords = new Set([...article.keywords, ...wordsOf(article.title)]);
    const body = new Set(wordsOf(article.body).filter((w) => w.length > 3));
    let score = 0;
    for (const word of asked) score += keywords.has(word) ? 2 : body.has(word) ? 1 : 0;
    if (score > bestScore) {
      best = article;
      bestScore = score;
    }
  }
  return best;
}

export function helpCenterServer(): McpServer {
  const server = new McpServer({ name: "helpcenter", version: "1.0.0" });
  server.registerTool(
    "search_articles",
    {
      description:
        "Searches the shop's help center (returns, refunds, shipping, order changes); answers the best article.",
      inputSchema: { query: z.string().describe("what the customer asks about, e.g. 'how do returns work'") },
    },
    async ({ query }) => {
      const article = bestArticle(query);
      const text = article ? `${article.title}: ${article.body}` : `No help center article matches "${query}".`;
      return { content: [{ type: "text", text }] };
    },
  );
  return server;
}

// Run as a process: MCP on stdin and stdout.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await helpCenterServer().connect(new StdioServerTransport());
}
