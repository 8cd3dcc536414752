"""``kafkacore completion bash|zsh``: a shell completion script for nouns, verbs, options and
option values with fixed choices (``-o json``), written from the command's own argparse tree, so
it always matches the installed version. Installing it (docs/tools.md):

    kafkacore completion bash > ~/.local/share/bash-completion/completions/kafkacore
    echo 'source <(kafkacore completion zsh)' >> ~/.zshrc

zsh runs the bash script through its bashcompinit layer: one script to keep right.
"""
from __future__ import annotations

import argparse
import shlex

from .common import EXIT_OK, add_noun, add_verb

SHELLS = ("bash", "zsh")
FUNCTION = "_kafkacore_complete"


def register(subparsers, common):
    verbs = add_noun(subparsers, "completion", "print a shell completion script (bash or zsh)")
    # the shell is the verb, so the grammar stays NOUN VERB: `kafkacore completion bash`
    for shell in SHELLS:
        add_verb(verbs, shell, common, run, f"the {shell} completion script",
                 f"Print the {shell} completion script; see docs/tools.md for installing it.")


def run(args):
    print(script(args.root_parser, args.verb), end="")  # the command tree cli.py built
    return EXIT_OK


# -- the command tree -------------------------------------------------------------------------
def command_tree(parser: argparse.ArgumentParser, path: str = "", tree=None) -> dict:
    """{path: {"subcommands", "options", "valued", "files", "choices": {option: [...]},
    "positionals"}} for the parser and every sub-parser; path is the words that lead there
    ("" for the top, "topics create"...)."""
    tree = {} if tree is None else tree
    node = tree[path] = {"subcommands": [], "options": [], "valued": [], "files": [], "choices": {},
                         "positionals": []}
    for action in parser._actions:  # argparse keeps its tree here; there is no public walk
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                node["subcommands"].append(name)
                command_tree(sub, f"{path} {name}".strip(), tree)
        elif action.option_strings:
            node["options"] += action.option_strings
            if action.nargs != 0:
                node["valued"] += action.option_strings
                if action.choices:
                    for opt in action.option_strings:
                        node["choices"][opt] = [str(c) for c in action.choices]
                elif "FILE" in str(action.metavar or ""):
                    node["files"] += action.option_strings
        elif action.choices:
            node["positionals"] += [str(c) for c in action.choices]
    return tree


def _case(tree, key) -> str:
    lines = []
    for path, node in tree.items():
        words = node[key]
        if words:
            label = shlex.quote(path) if path else '""'
            lines.append(f"        {label}) echo {shlex.quote(' '.join(words))} ;;")
    return "\n".join(lines)


def _choices_case(tree) -> str:
    lines = []
    for path, node in tree.items():
        for opt, choices in node["choices"].items():
            lines.append(f"        {shlex.quote(path + '|' + opt)}) echo {shlex.quote(' '.join(choices))} ;;")
    return "\n".join(lines)


def script(parser, shell: str) -> str:
    tree = command_tree(parser)
    body = BASH_TEMPLATE.format(
        function=FUNCTION, subcommands=_case(tree, "subcommands"), options=_case(tree, "options"),
        valued=_case(tree, "valued"), files=_case(tree, "files"), positionals=_case(tree, "positionals"),
        choices=_choices_case(tree))
    if shell == "zsh":
        return ZSH_PREAMBLE + body
    return body


ZSH_PREAMBLE = """\
# zsh: the bash completion below, through zsh's bashcompinit
(( ${+functions[compdef]} )) || { autoload -U compinit && compinit }
autoload -U +X bashcompinit && bashcompinit
"""

# One function per kind of word, each a case over the command path; the completer walks the
# words typed so far to find the path (skipping options and the values they take).
BASH_TEMPLATE = """\
# kafkacore shell completion (written by `kafkacore completion`; see docs/tools.md)
_kafkacore_subcommands() {{
    case "$1" in
{subcommands}
    esac
}}
_kafkacore_options() {{
    case "$1" in
{options}
    esac
}}
_kafkacore_valued() {{
    case "$1" in
{valued}
    esac
}}
_kafkacore_files() {{
    case "$1" in
{files}
    esac
}}
_kafkacore_positionals() {{
    case "$1" in
{positionals}
    esac
}}
_kafkacore_choices() {{
    case "$1|$2" in
{choices}
    esac
}}
{function}() {{
    local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="" path="" word i skip=0
    (( COMP_CWORD > 0 )) && prev="${{COMP_WORDS[COMP_CWORD-1]}}"
    for (( i = 1; i < COMP_CWORD; i++ )); do
        word="${{COMP_WORDS[i]}}"
        if (( skip )); then skip=0; continue; fi
        case "$word" in
            --*=*) ;;
            -*) [[ " $(_kafkacore_valued "$path") " == *" $word "* ]] && skip=1 ;;
            *) [[ " $(_kafkacore_subcommands "$path") " == *" $word "* ]] && path="${{path:+$path }}$word" ;;
        esac
    done
    if [[ "$prev" == -* && " $(_kafkacore_valued "$path") " == *" $prev "* ]]; then
        local choices
        choices="$(_kafkacore_choices "$path" "$prev")"
        if [[ -n "$choices" ]]; then
            COMPREPLY=( $(compgen -W "$choices" -- "$cur") )
        elif [[ " $(_kafkacore_files "$path") " == *" $prev "* ]]; then
            COMPREPLY=( $(compgen -f -- "$cur") )
        else
            COMPREPLY=()
        fi
        return 0
    fi
    if [[ "$cur" == -* ]]; then
        COMPREPLY=( $(compgen -W "$(_kafkacore_options "$path")" -- "$cur") )
    else
        COMPREPLY=( $(compgen -W "$(_kafkacore_subcommands "$path") $(_kafkacore_positionals "$path")" -- "$cur") )
    fi
    return 0
}}
complete -F {function} kafkacore
"""
