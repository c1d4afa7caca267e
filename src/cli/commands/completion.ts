/** `skein completion bash|zsh|fish`: a shell completion script, generated from the command tree. */
import { Argument, type Command } from "commander";
import { bashScript } from "../completion/bash.js";
import { fishScript } from "../completion/fish.js";
import { commandTree } from "../completion/tree.js";
import { zshScript } from "../completion/zsh.js";
import { examples } from "../options.js";

const SHELLS = { bash: bashScript, zsh: zshScript, fish: fishScript } as const;

export function registerCompletion(program: Command): void {
  program
    .command("completion")
    .summary("print a shell completion script")
    .description(
      "print a completion script for bash, zsh or fish: every command, option and declared choice (file names where nothing is declared)",
    )
    .addArgument(new Argument("<shell>", "the shell").choices(Object.keys(SHELLS)))
    .addHelpText(
      "after",
      examples(
        "skein completion bash > ~/.local/share/bash-completion/completions/skein",
        "skein completion fish > ~/.config/fish/completions/skein.fish",
        "source <(skein completion zsh)   # in ~/.zshrc, after compinit (bash: the same in ~/.bashrc)",
      ),
    )
    .action((shell: keyof typeof SHELLS, _options: unknown, command: Command) => {
      const program = command.parent ?? command;
      process.stdout.write(SHELLS[shell](commandTree(program)));
    });
}
