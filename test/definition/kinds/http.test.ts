/** `http`'s rules: the request payload `{ method, url, headers, query, body, timeout_ms, ok_status, max_redirects }`. */
import { describe, expect, it } from "vitest";
import { errorsOf, expectOneError, expectValid, withNode } from "./helpers.js";

const call = (payload: unknown) => withNode("http", { payload });
const URL_ = "https://api.example.com/orders";

describe("http: payload", () => {
  it("accepts a full request, templates in its fields, and secrets in its headers", () => {
    expectValid(
      call({
        method: "POST",
        url: URL_,
        headers: { "Content-Type": "application/json", Authorization: "Bearer {{ secrets.TOKEN }}" },
        query: { page: 2, tags: ["a", "b"], draft: false },
        body: { id: "{{ input.id }}" },
        timeout_ms: 5000,
        ok_status: [200, "3xx", "404-404"],
        max_redirects: 0,
      }),
    );
    expectValid(call({ url: "{{ input.url }}" }));
  });

  it("refuses a payload that is not an object (the format's rule, before the kind's)", () => {
    const [first] = errorsOf(call([URL_]));
    expect(first?.path).toBe("nodes[0].payload");
    expect(first?.message).toContain("expected an object");
  });

  it("refuses a missing url, a relative one, another scheme, and credentials in it", () => {
    expectOneError(call({}), "nodes[0].payload.url", "is required: the absolute http:// or https:// URL to call");
    expectOneError(
      call({ url: "/orders" }),
      "nodes[0].payload.url",
      'must be an absolute URL with http:// or https://, got "/orders"',
    );
    expectOneError(
      call({ url: "ftp://example.com/x" }),
      "nodes[0].payload.url",
      "must use http:// or https://, not ftp://",
    );
    expectOneError(
      call({ url: "https://me:pw@example.com/" }),
      "nodes[0].payload.url",
      "must not hold a user name or password; send credentials in a header",
    );
  });

  it("refuses an unknown field, an unknown method, and a body on a GET", () => {
    expectOneError(
      call({ url: URL_, verb: "GET" }),
      "nodes[0].payload.verb",
      "is not an http payload field; the fields are method, url",
    );
    expectOneError(
      call({ url: URL_, method: "FETCH" }),
      "nodes[0].payload.method",
      'must be one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS, got "FETCH"',
    );
    expectOneError(
      call({ url: URL_, body: {} }),
      "nodes[0].payload.body",
      "a GET request has no body; set method to POST, PUT or PATCH",
    );
    expectOneError(
      call({ url: URL_, method: "HEAD", body: "x" }),
      "nodes[0].payload.body",
      "a HEAD request has no body",
    );
  });

  it("refuses bad headers and query, each with its own path", () => {
    expectOneError(
      call({ url: URL_, headers: ["x"] }),
      "nodes[0].payload.headers",
      "must be an object of header names to string values",
    );
    expectOneError(
      call({ url: URL_, headers: { "Bad Name": "x" } }),
      "nodes[0].payload.headers.Bad Name",
      "is not a valid header name",
    );
    expectOneError(
      call({ url: URL_, headers: { "X-N": 5 } }),
      "nodes[0].payload.headers.X-N",
      "must be a string, got 5",
    );
    expectOneError(
      call({ url: URL_, headers: { "X-N": "a\r\nb" } }),
      "nodes[0].payload.headers.X-N",
      "must not hold a line break or a NUL character",
    );
    expectOneError(
      call({ url: URL_, query: "a=1" }),
      "nodes[0].payload.query",
      "must be an object of parameter names to values",
    );
  });

  it("refuses timeout_ms, ok_status and max_redirects out of range", () => {
    expectOneError(
      call({ url: URL_, timeout_ms: 0 }),
      "nodes[0].payload.timeout_ms",
      "must be an integer of milliseconds from 1 to 86400000, got 0",
    );
    expectOneError(
      call({ url: URL_, ok_status: [] }),
      "nodes[0].payload.ok_status",
      'must be a non-empty list of statuses (200) or ranges ("200-299", "2xx")',
    );
    expectOneError(call({ url: URL_, ok_status: ["6xx"] }), "nodes[0].payload.ok_status", 'got "6xx"');
    expectOneError(
      call({ url: URL_, max_redirects: 11 }),
      "nodes[0].payload.max_redirects",
      "must be an integer from 0 to 10, got 11",
    );
  });

  it("reports every problem of the payload, not the first only", () => {
    const errors = errorsOf(call({ method: "FETCH", timeout_ms: -1, extra: 1 }));
    expect(errors.map((e) => e.path).sort()).toEqual([
      "nodes[0].payload.extra",
      "nodes[0].payload.method",
      "nodes[0].payload.timeout_ms",
      "nodes[0].payload.url",
    ]);
  });

  it("does not refuse a document stored before http was a built-in kind", () => {
    expectValid(call({ anything: true }), { stored: true });
  });
});
