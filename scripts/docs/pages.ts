/** The generated docs pages and their full new text (hand-written head kept), for the script and the test. */
import { fileURLToPath } from "node:url";
import { cliReference } from "./cli-reference.js";
import { withGenerated } from "./generated-file.js";
import { httpReference } from "./http-reference.js";
import { workflowFormatReference } from "./workflow-format.js";

export interface GeneratedPage {
  file: string;
  text: string;
}

const docs = (name: string) => fileURLToPath(new URL(`../../docs/${name}`, import.meta.url));

export async function generatedPages(): Promise<GeneratedPage[]> {
  const format = docs("workflow-format.md");
  const cli = docs("cli.md");
  const http = docs("http-api.md");
  return [
    { file: format, text: withGenerated(format, "# Workflow format", workflowFormatReference()) },
    { file: cli, text: withGenerated(cli, "# The `skein` command", await cliReference()) },
    { file: http, text: withGenerated(http, "# HTTP API", await httpReference()) },
  ];
}
