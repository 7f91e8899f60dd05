"""An album through the real services: synced from Telegram, one hit in every kind of search.

A stack whose ingest serves the fake group "Flat hunt": Leo asks for a flat, Marta answers with
an album of three photos (a caption on each, all replying to the question), Leo replies to the
last photo, chatter follows. Telegram sends the album as three messages with one
``grouped_id``; the window (long, with the chatter) and the reply thread both hold it whole, so
without the album rule ranked search would show it twice. A word of one photo finds the album
once — in strict search as one item listing every photo (the matching ones marked), in hybrid
and word-only search as one hit whose snippet and ``album`` carry every photo's caption.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from chatseek_core import db
from chatseek_unitize.cutting import ALBUM_INDENT
from tests.fault_helpers import ALBUM_CAPTIONS, Stack, start_fake_ingest
from tests.stack_helpers import cli, cli_json, settle, stack_env
from tests.wire_helpers import assert_pinned

QUESTION = 2
PHOTOS = [3, 4, 5]
REPLY = 6
GARDEN = [16, 17, 18]
TULIPS = 19


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    home = tmp_path_factory.mktemp("albums") / "home"
    stack = Stack(home=home, env=stack_env(home))
    fake = start_fake_ingest(stack, world="albums")
    try:
        stack.up()
        cli(stack.env, "sources", "add", "@flathunt")
        report = cli_json(stack.env, "sync", "--json")
        assert report["stopped_by"] is None, report
        settle(stack.env)
        yield stack
    finally:
        stack.down()
        fake.kill()
        fake.wait(timeout=30)


def _strict(stack: Stack, query: str) -> list[dict[str, Any]]:
    doc = cli_json(stack.env, "messages", "search", "--json", "--limit", "50", "--", query)
    return list(doc["items"])


def _album_hits(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [h for h in doc["hits"] if set(PHOTOS) & set(h["msg_ids"])]


def test_the_window_and_the_reply_thread_each_hold_the_whole_album(stack: Stack) -> None:
    conn = db.connect(stack.data_dir / "unitize.db", readonly=True)
    try:
        rows = conn.execute("SELECT kind, key, msg_ids, text FROM units").fetchall()
    finally:
        conn.close()
    units = {str(r[1]): (str(r[0]), json.loads(r[2]), str(r[3])) for r in rows}
    assert units[f"t:{QUESTION}:0"][1] == [QUESTION, *PHOTOS, REPLY]
    assert units[f"t:{GARDEN[0]}:0"][1] == [*GARDEN, TULIPS]  # the reply went to the 2nd photo
    holding = [key for key, (_, ids, _) in units.items() if set(PHOTOS) & set(ids)]
    assert sorted(holding) == [f"t:{QUESTION}:0", "w:1"]
    for key in holding:
        _, ids, text = units[key]
        assert set(PHOTOS) <= set(ids)
        lines = text.splitlines()
        first = ids.index(PHOTOS[0])
        assert lines[first].endswith(f"Marta: [photo] {ALBUM_CAPTIONS[0]}")
        assert lines[first + 1 : first + 3] == [
            f"{ALBUM_INDENT}[photo] {caption}" for caption in ALBUM_CAPTIONS[1:]
        ]


def test_strict_search_finds_the_album_once_listing_every_photo(stack: Stack) -> None:
    (hit,) = _strict(stack, "sea")
    assert hit["msg_id"] == PHOTOS[2]
    assert [p["msg_id"] for p in hit["album"]] == PHOTOS
    assert [p["text"] for p in hit["album"]] == list(ALBUM_CAPTIONS)
    assert [p["matched"] for p in hit["album"]] == [False, False, True]
    assert "**sea**" in hit["album"][2]["snippet"]

    (both,) = _strict(stack, "kitchen OR rooms")
    assert [p["matched"] for p in both["album"]] == [True, True, False]

    shown = cli(stack.env, "messages", "search", "--", "sea").stdout
    assert "album of 3, 1 matching:" in shown and shown.count("Marta") == 1


@pytest.mark.parametrize("mode", ["hybrid", "lexical"])
def test_ranked_search_gives_the_album_one_hit_with_every_photos_caption(
    stack: Stack, mode: str
) -> None:
    doc = cli_json(
        stack.env, "search", "--mode", mode, "--json", "-k", "10", "--", "balcony facing the sea"
    )
    (hit,) = _album_hits(doc)
    assert hit["anchor_msg_id"] == PHOTOS[2]
    assert [p["msg_id"] for p in hit["album"]] == PHOTOS
    assert [p["text"] for p in hit["album"]] == list(ALBUM_CAPTIONS)
    assert all(caption in hit["snippet"] for caption in ALBUM_CAPTIONS)
    assert hit["snippet"].count("Marta:") == 1


def test_the_thread_of_any_photo_holds_the_whole_album(stack: Stack) -> None:
    for photo in GARDEN:
        doc = cli_json(stack.env, "thread", "--json", "--", "@flathunt", str(photo))
        assert doc["root_msg_id"] == GARDEN[0]
        assert [m["msg_id"] for m in doc["messages"]] == [*GARDEN, TULIPS]
    doc = cli_json(stack.env, "thread", "--json", "--", "@flathunt", str(PHOTOS[0]))
    assert doc["root_msg_id"] == QUESTION
    assert [m["msg_id"] for m in doc["messages"]] == [QUESTION, *PHOTOS, REPLY]


def test_the_album_hit_json_is_pinned(stack: Stack) -> None:
    doc = cli_json(stack.env, "search", "--json", "-k", "3", "--", "balcony facing the sea")
    assert_pinned("cli_search_album", doc)
    strict = cli_json(stack.env, "messages", "search", "--json", "--", "sea OR kitchen")
    assert_pinned("cli_messages_search_album", strict)
