"""What ``make demo`` prints last must work when pasted into a shell that lacks its home."""

from __future__ import annotations

import re
import shlex

from chatseek_gateway.demo import stop_hint


def test_the_stop_command_names_the_home_the_demo_ran_under() -> None:
    home = "/work/my repo/.chatseek"  # make demo's home: the repository's .chatseek
    hint = stop_hint({"CHATSEEK_HOME": home})
    commands = re.findall(r"`([^`]+)`", hint)
    stop = next(c for c in commands if c.endswith("stack down"))
    words = shlex.split(stop)
    assert words[0] == f"CHATSEEK_HOME={home}"  # quoted, so a space survives the shell
    assert words[1:] == ["chatseek", "stack", "down"]
    assert any(c.startswith(f"CHATSEEK_HOME={shlex.quote(home)} chatseek search") for c in commands)


def test_without_a_home_the_plain_command_is_right() -> None:
    assert "`chatseek stack down`" in stop_hint({})
