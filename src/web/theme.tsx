/**
 * Light or dark: the choice (light, dark, or the system's `prefers-color-scheme`) is kept in
 * localStorage and applied as `data-theme="light" | "dark"` on <html>, which style.css's palettes
 * key on. "system" follows the system's setting as it changes.
 */
import { useState } from "preact/hooks";

export type ThemeChoice = "system" | "light" | "dark";

const KEY = "skein.theme";
const darkQuery = window.matchMedia("(prefers-color-scheme: dark)");

function storedChoice(): ThemeChoice {
  try {
    const v = localStorage.getItem(KEY);
    return v === "light" || v === "dark" ? v : "system";
  } catch {
    return "system";
  }
}

function apply(choice: ThemeChoice): void {
  const theme = choice === "system" ? (darkQuery.matches ? "dark" : "light") : choice;
  document.documentElement.dataset.theme = theme;
}

// Before the first render, so the page never flashes the other palette.
apply(storedChoice());
darkQuery.addEventListener("change", () => apply(storedChoice()));

/** Applies and keeps a choice ("system" is kept as no choice). */
function choose(choice: ThemeChoice): void {
  apply(choice);
  try {
    if (choice === "system") localStorage.removeItem(KEY);
    else localStorage.setItem(KEY, choice);
  } catch {
    // Storage refused (a private window's quota): the choice lasts until the page reloads.
  }
}

/** The top bar's theme select. */
export function ThemeSwitch() {
  const [choice, setChoice] = useState<ThemeChoice>(storedChoice);
  return (
    <label class="theme-switch">
      Theme{" "}
      <select
        value={choice}
        onChange={(e) => {
          const next = e.currentTarget.value as ThemeChoice;
          choose(next);
          setChoice(next);
        }}
      >
        <option value="system">System</option>
        <option value="light">Light</option>
        <option value="dark">Dark</option>
      </select>
    </label>
  );
}
