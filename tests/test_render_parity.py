"""A hit's snippet reads like its unit: fusion's message rows render as unitize's messages do."""

from __future__ import annotations

import pytest

from chatseek_core.render import render_lines
from chatseek_fusion.store import MessageRow
from chatseek_unitize.model import Msg

MEDIA = [
    ("photo", None, "BALCONY 12 m2", "the flat", 5),
    ("photo", None, None, "", 5),
    ("document", None, None, "no name", None),
    ("document", "inv.pdf", "Total 40 EUR", "pay", None),
    ("poll", None, "Pizza or sushi?", "", None),
    ("video_note", None, None, "", None),
    ("animation", None, None, "lol", None),
    ("audio", "song.mp3", None, "", None),
    (None, None, None, "plain\ntext", None),
]


@pytest.mark.parametrize("sender", ["Ann", "", "Bob\nSmith"])
def test_a_message_row_renders_exactly_as_the_unit_message(sender: str) -> None:
    msgs, rows = [], []
    for n, (kind, file_name, media_text, text, group) in enumerate(MEDIA, start=1):
        date = 1_767_268_800 + 60 * n
        msgs.append(
            Msg(
                n,
                date,
                sender_name=sender,
                text=text,
                media_kind=kind,
                file_name=file_name,
                media_text=media_text,
                grouped_id=group,
            )
        )
        rows.append(
            MessageRow(
                "acc",
                1,
                n,
                date,
                None,
                sender,
                text,
                None,
                None,
                "message",
                kind,
                file_name,
                media_text,
                "",
                None,
                None,
                group,
            )
        )
    assert render_lines(rows) == render_lines(msgs)
