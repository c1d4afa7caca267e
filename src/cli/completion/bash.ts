/**
 * The bash completion script (`source <(skein completion bash)`): a function over COMP_WORDS
 * that walks the words typed so far through the command tree (skipping options and the values
 * of those that take one), then offers the subcommands, options, or declared choices that fit
 * the word being completed. Where nothing is declared (files, run ids), bash's default
 * (file names) applies. The zsh script reuses it through bashcompinit.
 */
import { type CommandSpec, flagsOf } from "./tree.js";

export function bashScript(tree: CommandSpec[]): string {
  const root = tree[0];
  if (!root) throw new Error("completion: empty command tree");
  const key = (c: CommandSpec) => JSON.stringify(c.path.join(" "));
  const cases = (pick: (c: CommandSpec) => string | null) =>
    tree
      .map((c) => {
        const body = pick(c);
        return body === null ? null : `    ${key(c)}) ${body} ;;`;
      })
      .filter((line): line is string => line !== null)
      .join("\n");
  const words = (list: readonly string[]) => `echo ${JSON.stringify(list.join(" "))}`;
  const valued = (c: CommandSpec) => c.options.filter((o) => o.takesValue).flatMap(flagsOf);
  const globalValued = valued(root);
  const optionChoices = tree.flatMap((c) =>
    c.options
      .filter((o) => o.choices.length > 0)
      .map((o) => {
        const patterns = flagsOf(o).map((f) => JSON.stringify(`${c.path.join(" ")}|${f}`));
        return `    ${patterns.join("|")}) ${words(o.choices)} ;;`;
      }),
  );
  const argumentChoices = tree.flatMap((c) =>
    c.argumentChoices
      .map((choices, i) =>
        choices.length > 0 ? `    ${JSON.stringify(`${c.path.join(" ")}|${i}`)}) ${words(choices)} ;;` : null,
      )
      .filter((line): line is string => line !== null),
  );
  return `# skein completion for bash. Load it with:  source <(skein completion bash)
# (or save it as ~/.local/share/bash-completion/completions/skein). Generated from the commands.

__skein_subcommands() {
  case "$1" in
${cases((c) => (c.subcommands.length > 0 ? words(c.subcommands) : null))}
  esac
}

__skein_options() {
  case "$1" in
${cases((c) => words([...new Set([...c.options.flatMap(flagsOf), ...(c === root ? [] : root.options.flatMap(flagsOf))])]))}
  esac
}

# Succeeds when option $2 of command $1 (or of the program) takes a value.
__skein_takes_value() {
  case " ${globalValued.join(" ")} " in *" $2 "*) return 0 ;; esac
  case "$1" in
${cases((c) => (c === root || valued(c).length === 0 ? null : `case " ${valued(c).join(" ")} " in *" $2 "*) return 0 ;; esac`))}
  esac
  return 1
}

__skein_option_choices() {
  case "$1|$2" in
${optionChoices.join("\n")}
  esac
}

__skein_argument_choices() {
  case "$1|$2" in
${argumentChoices.join("\n")}
  esac
}

_skein() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" prev="" path="" position=0 i word
  if (( COMP_CWORD > 0 )); then prev="\${COMP_WORDS[COMP_CWORD-1]}"; fi
  for (( i = 1; i < COMP_CWORD; i++ )); do
    word="\${COMP_WORDS[i]}"
    if [[ "$word" == -* ]]; then
      if [[ "$word" != *=* ]] && __skein_takes_value "$path" "$word"; then (( i++ )); fi
      continue
    fi
    if (( position == 0 )) && [[ " $(__skein_subcommands "$path") " == *" $word "* ]]; then
      path="\${path:+$path }$word"
    else
      (( position++ ))
    fi
  done
  COMPREPLY=()
  if [[ "$prev" == -* ]] && __skein_takes_value "$path" "$prev"; then
    local choices
    choices="$(__skein_option_choices "$path" "$prev")"
    [[ -z "$choices" ]] && choices="$(__skein_option_choices "" "$prev")"
    if [[ -n "$choices" ]]; then COMPREPLY=( $(compgen -W "$choices" -- "$cur") ); fi
    return 0
  fi
  if [[ "$cur" == -* ]]; then
    COMPREPLY=( $(compgen -W "$(__skein_options "$path")" -- "$cur") )
    return 0
  fi
  local candidates
  if (( position == 0 )); then candidates="$(__skein_subcommands "$path")"; fi
  candidates="$candidates $(__skein_argument_choices "$path" "$position")"
  COMPREPLY=( $(compgen -W "$candidates" -- "$cur") )
  return 0
}

complete -o default -F _skein skein
`;
}
