"""The CLI's progress display for long operations: rich on a terminal, JSON lines with --json."""

from __future__ import annotations

import io
import json
from typing import Any

from rich.console import Console

from chatseek.common.v1 import common_pb2
from chatseek.gateway.v1 import gateway_service_pb2 as pb
from chatseek_core.operations import operation_progress
from chatseek_core.wire_json import from_json
from chatseek_gateway.cli.common import run_operation


def sync_events() -> list[Any]:
    return [
        pb.SyncResponse(
            event=operation_progress(
                "sync",
                0,
                2,
                "City news: 100 messages",
                item="City news",
                item_done=100,
                count=100,
                account="home",
            )
        ),
        pb.SyncResponse(
            event=operation_progress(
                "sync",
                0,
                2,
                "Telegram asked to wait 30 s",
                item="City news",
                item_done=100,
                count=100,
                wait_s=30.0,
                account="home",
            )
        ),
        pb.SyncResponse(
            event=common_pb2.OperationEvent(sync=from_json({"new": 100}, common_pb2.SyncReport()))
        ),
    ]


def test_json_streams_every_progress_event_as_one_line_and_returns_the_report() -> None:
    stream = io.StringIO()
    report = run_operation(sync_events(), as_json=True, stream=stream)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert report["new"] == 100 and report["stopped_by"] is None
    assert [(e["event"], e["item"], e["item_done"], e["wait_s"]) for e in lines] == [
        ("progress", "City news", 100, 0.0),
        ("progress", "City news", 100, 30.0),
    ]
    assert {e["account"] for e in lines} == {"home"} and lines[0]["total"] == 2


def test_a_terminal_shows_the_stage_the_chat_with_its_count_and_the_flood_wait_left() -> None:
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=140, color_system=None)
    report = run_operation(sync_events(), console=console)
    shown = screen.getvalue()
    assert report["new"] == 100
    assert "sync" in shown and "0/2" in shown
    assert "City news" in shown and "100 messages" in shown and "msg/s" in shown
    assert "Telegram flood wait:" in shown and "s left" in shown


def test_operations_without_items_show_their_note_and_count() -> None:
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=140, color_system=None)
    events = [
        pb.EmbedResponse(event=operation_progress("embed", 40, 100, "units")),
        pb.EmbedResponse(
            event=common_pb2.OperationEvent(embed=common_pb2.EmbedReport(embedded=100))
        ),
    ]
    assert run_operation(events, console=console) == {
        "embedded": 100,
        "cached": 0,
        "skipped": 0,
        "remaining": 0,
    }
    assert "embed" in screen.getvalue() and "40/100" in screen.getvalue()


def test_nothing_is_drawn_when_stderr_is_not_a_terminal(capsys: Any) -> None:
    assert run_operation(sync_events())["new"] == 100
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""
