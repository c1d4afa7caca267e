import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

/**
 * The admin page (src/web) built into dist/web, which `skein serve` serves at `/`. `npm run
 * dev:web` serves it with live reload and sends /v1 to a `skein serve` on port 8080.
 */
export default defineConfig({
  root: "src/web",
  publicDir: "public",
  // Preact's JSX runtime: small, and its text children are always text nodes, never HTML.
  oxc: { jsx: { runtime: "automatic", importSource: "preact" } },
  resolve: {
    // CodeMirror's styles in an adopted stylesheet, not a <style> element the CSP would refuse.
    alias: [
      { find: /^style-mod$/, replacement: fileURLToPath(new URL("./src/web/editor/style-mod.ts", import.meta.url)) },
    ],
  },
  build: {
    outDir: "../../dist/web",
    emptyOutDir: true,
    target: "es2022",
    // No inline polyfill script and no data: URLs: the page runs under a CSP without 'unsafe-inline'.
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    // One stylesheet, linked from index.html, even for styles of a lazily loaded chunk (the editor).
    cssCodeSplit: false,
    reportCompressedSize: false,
    // elkjs (1.5 MB) is its own chunk, loaded when a graph is first laid out, never with the page.
    chunkSizeWarningLimit: 1600,
  },
  server: { proxy: { "/v1": "http://127.0.0.1:8080" } },
});
