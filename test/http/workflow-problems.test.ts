/** `/v1/workflows/validate` and PUT answer every problem at once: the schema's and the graph's together. */
import { describe, expect, it } from "vitest";
import { bearer, TOKENS, testApi } from "./helpers.js";

const both = {
  id: "both",
  nodes: [
    { node_id: "s", agent_type: "writer" },
    { node_id: "a", agent_type: "writer", depends_on: ["s", "b"], retry_count: "3" },
    { node_id: "b", agent_type: "writer", depends_on: ["a"], timout: 5 },
    { node_id: "c", agent_type: "writer", depends_on: ["fetch_x"] },
  ],
};

describe("every problem in one answer", () => {
  it("lists schema errors, the nearest field for a typo, a cycle and an unknown node together", async () => {
    const { app } = await testApi();
    const res = await app.inject({
      method: "POST",
      url: "/v1/workflows/validate",
      headers: bearer(TOKENS.admin),
      payload: both,
    });
    expect(res.statusCode).toBe(200);
    expect(res.json().ok).toBe(false);
    expect(res.json().errors).toEqual([
      { path: "nodes[1].retry_count", message: 'expected a number, got "3"' },
      { path: "nodes[2]", message: 'unknown field "timout" (did you mean "timeout"?)' },
      { path: "nodes[3].depends_on[0]", message: 'unknown node "fetch_x"' },
      { path: "nodes[1].depends_on[1]", message: expect.stringContaining("cycle a -> b -> a") },
    ]);

    const put = await app.inject({
      method: "PUT",
      url: "/v1/workflows/both",
      headers: bearer(TOKENS.admin),
      payload: both,
    });
    expect(put.statusCode).toBe(400);
    expect(put.json().error.details.problems).toHaveLength(4);
  });
});
