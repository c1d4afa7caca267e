/**
 * Debian's chromium, headless, as the browser tests, the bench and the screenshots launch it
 * (playwright-core downloads no browser; `npm test` installs this one: scripts/test-prerequisites.sh).
 */
import { existsSync } from "node:fs";
import { type Browser, chromium } from "playwright-core";

export const CHROMIUM = process.env.SKEIN_CHROMIUM ?? "/usr/bin/chromium";

/**
 * Headless, without the background services that would dial out (they flood refused
 * connections on an offline machine). playwright gives each launch a fresh --user-data-dir.
 */
const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/** @throws Error saying how to install chromium when it is missing. */
export function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`${CHROMIUM} is missing: install it with apt-get install -y chromium (npm test does, as root)`);
  }
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
}
