/**
 * The package's entry points, as an application imports them (the built files: `npm test`
 * builds first): the library, and the HTTP API for serving it from one's own process.
 */
import { describe, expect, it } from "vitest";

describe("the package", () => {
  it("exports the engine from skein and the API server from skein/http", async () => {
    // Specifiers in variables: the type check runs before the build that makes these files.
    const [main, api] = ["skein", "skein/http"];
    const library = (await import(main)) as typeof import("../../src/index.js");
    const http = (await import(api)) as typeof import("../../src/http/server.js");
    expect(typeof library.createEngine).toBe("function");
    expect(typeof http.createServer).toBe("function");
    const engine = await library.createEngine({ database: "sqlite::memory:" });
    try {
      const app = await http.createServer({ engine });
      expect((await app.inject({ method: "GET", url: "/v1/health" })).statusCode).toBe(200);
      await app.close();
    } finally {
      await engine.close();
    }
  });
});
