"""The README's promises: its first two commands, and its query examples parse."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from chatseek_gateway.cli import build_parser
from chatseek_lexical.query import parse, tree_to_json

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def _examples() -> list[str]:
    block = README.split("<!-- tested:", 1)[1].split("```text", 1)[1].split("```", 1)[0]
    return [line.strip() for line in block.splitlines() if line.startswith("    ")]


def test_the_readme_starts_with_make_demo_then_make_test() -> None:
    commands = re.findall(r"^make \w+", README, flags=re.M)
    assert commands[:2] == ["make demo", "make test"]


@pytest.mark.parametrize("query", _examples())
def test_every_query_example_in_the_readme_parses(query: str) -> None:
    tree = tree_to_json(parse(query))
    assert tree["version"] == 1 and tree["language"] == "lucene-v1"


def test_every_cli_command_has_help() -> None:
    parser = build_parser()
    actions = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    for choice in actions[0]._choices_actions:
        assert choice.help, choice.dest
