/**
 * style-mod, CodeMirror's CSS-in-JS, with its rules always in a constructed stylesheet adopted by
 * the document (CSSOM, which style-src 'self' allows). style-mod itself adopts sheets only in
 * shadow roots and gives a document a <style> element, which the page's CSP refuses. Vite
 * resolves `style-mod` to this file (vite.config.ts); the rules are built by the original.
 */
import { StyleModule as Original } from "../../../node_modules/style-mod/src/style-mod.js";

interface Mounted {
  sheet: CSSStyleSheet;
  modules: Original[];
}

const mounted = new WeakMap<Document, Mounted>();

function rulesOf(module: Original): string[] {
  return (module as unknown as { rules: string[] }).rules;
}

export class StyleModule extends Original {
  static override mount(
    root: Document | ShadowRoot | DocumentOrShadowRoot,
    modules: Original | readonly Original[],
    options?: { nonce?: string },
  ): void {
    if (!(root instanceof Document) || !root.adoptedStyleSheets || typeof CSSStyleSheet === "undefined") {
      Original.mount(root, modules, options);
      return;
    }
    let set = mounted.get(root);
    if (!set) {
      set = { sheet: new CSSStyleSheet(), modules: [] };
      mounted.set(root, set);
    }
    // As style-mod orders them: each module's rules after those of the modules listed before it.
    let pos = 0;
    let j = 0;
    for (const module of Array.isArray(modules) ? modules : [modules]) {
      let index = set.modules.indexOf(module);
      if (index < j && index > -1) {
        for (let k = 0; k < rulesOf(module).length; k++) set.sheet.deleteRule(rulesStart(set, index));
        set.modules.splice(index, 1);
        j--;
        index = -1;
      }
      if (index === -1) {
        pos = rulesStart(set, j);
        set.modules.splice(j++, 0, module);
        for (const rule of rulesOf(module)) set.sheet.insertRule(rule, pos++);
      } else {
        j = index + 1;
      }
    }
    if (!root.adoptedStyleSheets.includes(set.sheet)) root.adoptedStyleSheets = [set.sheet, ...root.adoptedStyleSheets];
  }
}

/** The position in the sheet of the first rule of the module at `index`. */
function rulesStart(set: Mounted, index: number): number {
  let n = 0;
  for (let i = 0; i < index; i++) n += rulesOf(set.modules[i] as Original).length;
  return n;
}
