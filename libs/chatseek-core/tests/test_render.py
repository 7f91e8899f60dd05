"""The one message line: media markers, polls, albums, replies and forwards."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chatseek_core.render import (
    _MONTHS as MONTH_NAMES,
)
from chatseek_core.render import (
    ALBUM_INDENT,
    MEDIA_TEXT_MAX_CHARS,
    _minute_stamp,
    date_words,
    indexed_text,
    one_line,
    render_line,
    render_lines,
    same_album,
    without_repeated_dates,
)

NOON = 1_767_268_800  # 2026-01-01 12:00 UTC


@dataclass(frozen=True)
class Row:
    """A message with the attributes rendering reads, plus some it must ignore."""

    date: int = NOON
    sender_name: str = "Ann"
    text: str = ""
    media_kind: str | None = None
    file_name: str | None = None
    media_text: str | None = None
    grouped_id: int | None = None
    reply_to: int | None = None
    forwarded_from: str | None = None


def test_a_plain_message_is_time_sender_and_text_on_one_line() -> None:
    assert render_line(Row(date=NOON + 62, text="see\nyou  soon")) == (
        "[2026-01-01 12:01] Ann: see you soon"
    )


def test_an_empty_sender_is_unknown_and_an_empty_body_leaves_no_trailing_space() -> None:
    assert render_line(Row(sender_name="", text="hi")) == "[2026-01-01 12:00] unknown: hi"
    assert render_line(Row(text="")) == "[2026-01-01 12:00] Ann:"


@pytest.mark.parametrize(
    ("row", "body"),
    [
        (Row(media_kind="photo", text="our flat"), "[photo] our flat"),
        (Row(media_kind="photo", media_text="BALCONY 12 m2"), "[photo] BALCONY 12 m2"),
        (Row(media_kind="voice"), "[voice]"),
        (Row(media_kind="video_note"), "[video message]"),
        (Row(media_kind="animation"), "[GIF]"),
        (Row(media_kind="document"), "[document]"),
        (
            Row(media_kind="document", file_name="inv.pdf", media_text="Total 40", text="pay"),
            "[document: inv.pdf] Total 40 pay",
        ),
        (Row(media_kind="audio", file_name="song.mp3"), "[audio: song.mp3]"),
        (Row(media_kind="dice"), "[dice]"),
        (Row(media_kind="paid_media"), "[paid media]"),
    ],
)
def test_media_shows_a_marker_then_its_read_out_text_then_the_caption(row: Row, body: str) -> None:
    assert render_line(row) == f"[2026-01-01 12:00] Ann: {body}"


def test_a_poll_contact_location_or_venue_shows_its_text_inside_the_marker() -> None:
    poll = Row(media_kind="poll", media_text="Pizza\nor sushi?")
    assert render_line(poll).endswith("Ann: [poll: Pizza or sushi?]")
    assert render_line(Row(media_kind="venue", media_text="Cafe, Main St")).endswith(
        "[venue: Cafe, Main St]"
    )
    assert render_line(Row(media_kind="poll")).endswith("Ann: [poll]")


def test_media_text_is_clipped_with_an_ellipsis() -> None:
    line = render_line(Row(media_kind="photo", media_text="x" * (MEDIA_TEXT_MAX_CHARS + 5)))
    assert line.endswith("[photo] " + "x" * MEDIA_TEXT_MAX_CHARS + "…")


def test_an_album_is_one_line_group_with_later_photos_indented() -> None:
    album = [
        Row(media_kind="photo", grouped_id=7, text="the flat"),
        Row(media_kind="photo", grouped_id=7),
        Row(media_kind="photo", grouped_id=7, media_text="BALCONY"),
        Row(text="nice"),
        Row(media_kind="photo", grouped_id=8),
    ]
    assert render_lines(album) == [
        "[2026-01-01 12:00] Ann: [photo] the flat",
        ALBUM_INDENT + "[photo]",
        ALBUM_INDENT + "[photo] BALCONY",
        "[2026-01-01 12:00] Ann: nice",
        "[2026-01-01 12:00] Ann: [photo]",
    ]
    assert same_album(album[0], album[1])
    assert not same_album(album[3], Row())


def test_a_reply_or_a_forward_renders_as_the_message_it_is() -> None:
    reply = Row(text="yes, still free", reply_to=41)
    forward = Row(text="flat for rent", forwarded_from="Valencia Rentals")
    assert render_line(reply) == "[2026-01-01 12:00] Ann: yes, still free"
    assert render_line(forward) == "[2026-01-01 12:00] Ann: flat for rent"


def test_a_line_shows_the_date_only_when_it_changes() -> None:
    lines = [
        "[2024-05-01 10:02] Ann: hi",
        "[2024-05-01 10:05] Bob: hello [2024-05-01 10:05] quoted",
        "    [photo] second photo of an album",
        "[2024-05-02 09:00] Ann: next day",
        "[2024-05-02 09:01] Bob: ok",
    ]
    assert without_repeated_dates(lines) == [
        "[2024-05-01 10:02] Ann: hi",
        "[10:05] Bob: hello [2024-05-01 10:05] quoted",
        "    [photo] second photo of an album",
        "[2024-05-02 09:00] Ann: next day",
        "[09:01] Bob: ok",
    ]


def test_the_word_index_reads_each_date_once_as_words_and_no_stamp() -> None:
    rows = [
        Row(date=1_697_191_200, text="paid 10"),  # 2023-10-13 10:00
        Row(date=1_697_191_200 + 86_400, sender_name="Bob", text="[2024-05-01 10:05] quoted"),
        Row(date=1_698_796_800, media_kind="photo", grouped_id=7, text="balcony"),  # 2023-11-01
        Row(date=1_698_796_800, media_kind="photo", grouped_id=7, text="kitchen"),
    ]
    text = "\n".join(render_lines(rows))
    assert date_words(text) == "2023 october октябрь november ноябрь 13 14 1"
    assert indexed_text(text) == (
        "Ann: paid 10\n"
        "Bob: [2024-05-01 10:05] quoted\n"  # a message's own text keeps its digits
        "Ann: [photo] balcony\n"
        f"{ALBUM_INDENT}[photo] kitchen\n"
        "2023 october октябрь november ноябрь 13 14 1"
    )
    assert date_words("no stamps here\n[2023-13-00 10:00] not a date") == "2023"
    assert indexed_text("no stamps here") == "no stamps here\n"


_STAMPS = st.sampled_from(
    [
        "[2023-10-03 10:15] ",
        "[2024-13-00 09:00] ",
        "[1999-01-31 23:59] ",
        "[2023-10-03 1:15] ",
        "[2023-10-04 10:15]",
        "",
    ]
)


@given(st.lists(st.tuples(st.sampled_from(["", "  ", "x"]), _STAMPS, st.text(max_size=30))))
def test_indexed_text_strips_each_line_start_stamp_and_words_its_dates(
    parts: list[tuple[str, str, str]],
) -> None:
    text = "\n".join(f"{lead}{stamp}{body}" for lead, stamp, body in parts)
    stamp = re.compile(r"^\[(\d{4})-(\d{2})-(\d{2}) \d{2}:\d{2}\] ", re.MULTILINE)
    stripped = stamp.sub("", text)
    dates = dict.fromkeys(stamp.findall(text))
    years = dict.fromkeys(y for y, _, _ in dates)
    months = dict.fromkeys(int(m) for _, m, _ in dates if 1 <= int(m) <= 12)
    names = [name for m in months for name in MONTH_NAMES[m - 1]]
    days = dict.fromkeys(str(int(d)) for _, _, d in dates if 1 <= int(d) <= 31)
    words = " ".join([*years, *names, *days])
    assert date_words(text) == words
    assert indexed_text(text) == f"{stripped}\n{words}"


@given(st.text(alphabet=st.sampled_from(" \t\n\r\x0b\x0c\x1c\x85\xa0\u2028\u3000ab\u0436")))
def test_one_line_folds_whitespace_as_splitting_into_words_does(text: str) -> None:
    assert one_line(text) == " ".join(text.split())


@given(st.text())
def test_one_line_folds_any_text_as_splitting_into_words_does(text: str) -> None:
    assert one_line(text) == " ".join(text.split())


@given(st.integers(min_value=0, max_value=2**33 // 60))
def test_a_minute_stamp_is_the_utc_date_and_clock_of_that_minute(minute: int) -> None:
    assert _minute_stamp(minute) == time.strftime("%Y-%m-%d %H:%M", time.gmtime(minute * 60))
