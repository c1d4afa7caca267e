/**
 * The zsh completion script (`source <(skein completion zsh)`): the bash one, through zsh's
 * bashcompinit, so the two shells complete exactly the same words.
 */
import { bashScript } from "./bash.js";
import type { CommandSpec } from "./tree.js";

export function zshScript(tree: CommandSpec[]): string {
  const bash = bashScript(tree).replace(/^# skein completion for bash[\s\S]*?\n\n/, "");
  return `#compdef skein
# skein completion for zsh. Load it with:  source <(skein completion zsh)
# (in ~/.zshrc, after compinit). Generated from the commands.
autoload -U +X bashcompinit && bashcompinit

${bash}`;
}
