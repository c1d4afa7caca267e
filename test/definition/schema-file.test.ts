import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { workflowJsonSchema, workflowJsonSchemaText } from "../../src/definition/index.js";
import { BUILTIN_KINDS } from "../../src/definition/kinds/index.js";
import { BUILT_IN_AGENT_TYPES } from "../../src/definition/schema.js";

const FILE = fileURLToPath(new URL("../../schema/workflow.schema.json", import.meta.url));

describe("schema/workflow.schema.json", () => {
  it("matches the zod schema", () => {
    let committed = "";
    try {
      committed = readFileSync(FILE, "utf8");
    } catch {
      // Reported by the assertion below.
    }
    const upToDate = committed === workflowJsonSchemaText();
    expect(upToDate, "schema/workflow.schema.json is out of date: run `npm run gen:schema`").toBe(true);
  });

  it("describes the input format: defaulted fields are optional", () => {
    const schema = workflowJsonSchema() as {
      $id: string;
      required: string[];
      properties: { nodes: { items: { required: string[]; additionalProperties: boolean } } };
    };
    expect(schema.$id).toBeTruthy();
    expect(schema.required).toEqual(["id", "nodes"]);
    expect(schema.properties.nodes.items.required).toEqual(["node_id", "agent_type"]);
    expect(schema.properties.nodes.items.additionalProperties).toBe(false);
  });

  it("offers the built-in agent types as agent_type's examples", () => {
    expect([...BUILT_IN_AGENT_TYPES].sort()).toEqual([...BUILTIN_KINDS].sort());
    const schema = workflowJsonSchema() as {
      properties: { nodes: { items: { properties: { agent_type: { examples: string[] } } } } };
    };
    expect(schema.properties.nodes.items.properties.agent_type.examples).toEqual([...BUILT_IN_AGENT_TYPES]);
  });
});
