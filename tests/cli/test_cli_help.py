"""Every option and argument of every `attnmt` command says what it does in `--help`."""

from __future__ import annotations

import argparse

import pytest

from attnmt.cli import build_parser, main


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    found = {}
    for action in parser._actions:  # argparse keeps its parsers here; there is no public walk
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found[name] = sub
    return found


def test_every_option_of_every_command_has_a_help_text():
    commands = _commands(build_parser())
    assert {"train", "translate", "evaluate", "plot-attention", "study", "serve"} <= set(commands)
    missing = [f"attnmt {name} {'/'.join(action.option_strings) or action.dest}"
               for name, sub in commands.items() for action in sub._actions
               if not isinstance(action, argparse._HelpAction) and not (action.help or "").strip()]
    assert not missing, f"options without a help text: {', '.join(missing)}"


def test_a_command_built_alone_is_the_command_of_the_whole_parser():
    """main() builds only the command it parses; that parser is the one the whole parser holds."""
    for name, whole in _commands(build_parser()).items():
        alone = _commands(build_parser(name))
        assert list(alone) == [name]
        assert alone[name].format_help() == whole.format_help(), name
    assert set(_commands(build_parser("no-such-command"))) == set(_commands(build_parser()))


def test_the_thread_options_are_declared_once_for_every_command_that_has_them():
    commands = _commands(build_parser())
    for flag in ("--threads", "--inter-threads"):
        found = {name: (a.type, a.default, a.help) for name, sub in commands.items() for a in sub._actions
                 if flag in a.option_strings}
        assert set(found) == {"translate", "evaluate", "serve"}, flag
        assert len(set(found.values())) == 1, found  # one declaration: the same type, default and help


@pytest.mark.parametrize("argv, expected", [
    (["translate", "--model", "m", "--beam", "five"], "attnmt: error: translate: argument --beam: invalid int value: "
                                                       "'five'; see attnmt translate --help"),
    (["evaluate", "--model", "m"], "attnmt: error: evaluate: the following arguments are required: --src, --ref; "
                                   "see attnmt evaluate --help"),
])
def test_argument_errors_are_one_line_that_points_to_help(capsys, argv, expected):
    with pytest.raises(SystemExit) as refused:
        main(argv)
    assert refused.value.code == 2
    assert capsys.readouterr().err.splitlines() == [expected]  # no 14-line usage before it


def test_the_serve_doc_lists_the_options_and_checkpoints_of_serve_help():
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "serve.md").read_text(encoding="utf-8")
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `(--[a-z0-9-]+)[^`]*` \|[^|]*\|(.*)\|$", doc, re.M)}
    serve = _commands(build_parser())["serve"]
    options = {s for a in serve._actions for s in a.option_strings if s.startswith("--") and s != "--help"}
    assert rows and set(rows) <= options, f"docs/serve.md lists options serve lacks: {set(rows) - options}"
    checkpoint = next(a for a in serve._actions if "--checkpoint" in a.option_strings)
    names = re.findall(r"\b(best|last|averaged|step[A-Z]|ema)\b", checkpoint.help)
    assert len(set(names)) == 5 and all(f"`{name}" in rows["--checkpoint"] for name in names)
