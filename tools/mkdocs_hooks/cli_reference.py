"""mkdocs hook: the CLI reference page (``cli.md``), generated from ppbn's own parser.

At every build, ``on_files`` builds the ``ppbn`` argparse parser (``ppbn.cli.build_parser``)
and adds a generated page ``cli.md`` holding every command and subcommand: its usage,
description, and each option with its help, choices and default. The page exists only
in the built site, so it cannot go stale. mkdocs.yml names this file under ``hooks:``; it
lives outside docs/ so that mkdocs does not take it for a page.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path

PAGE = "cli.md"
WIDTH = 88  # usage lines are wrapped at this width, whatever the terminal
INTRO = (
    "Every command and subcommand of `ppbn`, generated from the program's own parser each "
    "time the site is built. `ppbn COMMAND --help` prints the same text. Errors a user can "
    "fix are one line on stderr with exit code 2 (see "
    "[Outputs and exit codes](operations/outputs.md))."
)


def subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """(one-line help, parser) of each subcommand of ``parser``, in registration order."""
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
        seen: set[int] = set()
        for name, sub in action.choices.items():
            if id(sub) not in seen:  # an alias maps to a parser already listed
                seen.add(id(sub))
                yield helps.get(name, ""), sub


def all_parsers(
    parser: argparse.ArgumentParser, summary: str = ""
) -> Iterator[tuple[int, str, argparse.ArgumentParser]]:
    """(depth, one-line help, parser) of ``parser`` and every parser below it, depth first."""
    yield parser.prog.count(" "), summary, parser
    for help_text, sub in subcommands(parser):
        yield from all_parsers(sub, help_text)


def escape(text: str) -> str:
    """Help text as Markdown: backticks stay code; characters Markdown would read are escaped."""
    out = []
    for index, part in enumerate(text.split("`")):
        if index % 2:  # inside backticks
            out.append(f"`{part}`")
        else:
            for char in "\\*_[]<>|":
                part = part.replace(char, "\\" + char)
            out.append(part)
    return "".join(out)


def usage(parser: argparse.ArgumentParser) -> str:
    formatter = parser.formatter_class(prog=parser.prog, width=WIDTH)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return formatter.format_help().strip()


def option_help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The help as ``--help`` prints it (``%(default)s`` and the like filled in)."""
    if not action.help:
        return ""
    formatter = parser.formatter_class(prog=parser.prog)
    return " ".join(formatter._expand_help(action).split())


def option_name(action: argparse.Action) -> str:
    if not action.option_strings:
        return str(action.metavar or action.dest)
    if action.nargs == 0:
        return ", ".join(action.option_strings)
    metavar = action.metavar or (
        "{" + ",".join(map(str, action.choices)) + "}" if action.choices else action.dest.upper()
    )
    if isinstance(metavar, tuple):
        metavar = " ".join(metavar)
    return ", ".join(f"{flag} {metavar}" for flag in action.option_strings)


def option_line(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """One list item: the option, its help, and what the help leaves out (required, the
    choices when a metavar hides them, the default when the help does not name one)."""
    help_text = option_help(parser, action)
    notes = []
    if action.required and action.option_strings:
        notes.append("required")
    if action.choices and action.metavar:
        notes.append("one of " + ", ".join(f"`{c}`" for c in action.choices))
    if (
        action.option_strings
        and action.nargs != 0
        and action.default not in (None, argparse.SUPPRESS)
        and "default" not in help_text
    ):
        notes.append(f"default `{action.default}`")
    parts = [escape(help_text)] if help_text else []
    if notes:
        parts.append(f"({'; '.join(notes)})")
    return f"- `{option_name(action)}`" + (": " + " ".join(parts) if parts else "")


def render_parser(depth: int, summary: str, parser: argparse.ArgumentParser) -> list[str]:
    lines = [f"{'#' * min(depth + 2, 6)} {parser.prog}", ""]
    if summary and depth > 0:
        lines += [f"*{escape(summary)}*", ""]
    lines += ["```", usage(parser), "```", ""]
    if parser.description:
        lines += [escape(" ".join(parser.description.split())), ""]
    for group in parser._action_groups:
        actions = [
            a
            for a in group._group_actions
            if a.help is not argparse.SUPPRESS
            and not isinstance(a, argparse._HelpAction | argparse._SubParsersAction)
        ]
        if not actions:
            continue
        lines += [f"**{escape(group.title or 'options')}**", ""]
        for action in actions:
            lines.append(option_line(parser, action))
        lines.append("")
    commands = list(subcommands(parser))
    if commands:
        lines += ["**commands**", ""]
        for help_text, sub in commands:
            anchor = sub.prog.replace(" ", "-")
            lines.append(f"- [`{sub.prog}`](#{anchor}): {escape(help_text)}".rstrip(": "))
        lines.append("")
    if parser.epilog:
        lines += [escape(" ".join(parser.epilog.split())), ""]
    return lines


def render(parser: argparse.ArgumentParser) -> str:
    """The whole reference page as Markdown."""
    lines = ["# CLI reference", "", INTRO, ""]
    for depth, summary, sub in all_parsers(parser):
        lines += render_parser(depth, summary, sub)
    return "\n".join(lines).rstrip() + "\n"


def build_parser(repo: Path) -> argparse.ArgumentParser:
    if str(repo) not in sys.path:  # the checkout's ppbn, also when it is not installed
        sys.path.insert(0, str(repo))
    from ppbn.cli import build_parser as ppbn_parser

    return ppbn_parser()


def on_files(files, config):
    """mkdocs event: add the generated ``cli.md`` to the site's files."""
    from mkdocs.structure.files import File

    repo = Path(config["config_file_path"]).resolve().parent
    files.append(File.generated(config, PAGE, content=render(build_parser(repo))))
    return files
