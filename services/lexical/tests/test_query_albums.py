"""Strict search over albums: the photos of one media group are one hit, wherever pages end.

The chat "Flats" holds two albums of four photos (media groups 71 and 72) whose words are read
out of the photos, a caption on each album's first photo, and plain messages around them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chatseek_core import db
from chatseek_lexical.query import SearchRequest, search

from .conftest_query import ME, Chat, DataSet, Media, Msg, Sender, build_store, ts

FLATS = -1005555555555
NOW = ts("2026-04-02T12:00:00Z")
FIRST_ALBUM = (10, 11, 12, 13)
SECOND_ALBUM = (20, 21, 22, 23)
READ_OUT = {
    10: "kitchen with gas oven",
    11: "bedroom with balcony",
    12: "bathroom with balcony door",
    13: "floor plan 54 m2",
    20: "living room",
    21: "balcony over the park",
    22: "kitchen",
    23: "garage",
}


def _photo(msg_id: int, group: int, caption: str = "") -> Msg:
    minute = 0 if group == 71 else 30
    return Msg(
        ME,
        FLATS,
        msg_id,
        f"2026-03-10T10:{minute:02d}:00Z",
        1,
        caption,
        media=Media("photo", extracted=READ_OUT[msg_id]),
        grouped=group,
    )


DATA = DataSet(
    accounts=[(ME, True)],
    chats=[Chat(ME, FLATS, "supergroup", "Flats")],
    senders=[Sender(ME, 1, "Ana"), Sender(ME, 2, "Bob")],
    messages=[
        Msg(ME, FLATS, 1, "2026-03-10T09:00:00Z", 2, "any flat with a balcony?"),
        _photo(10, 71, "two rooms near the station"),
        *(_photo(i, 71) for i in FIRST_ALBUM[1:]),
        _photo(20, 72, "three rooms by the park"),
        *(_photo(i, 72) for i in SECOND_ALBUM[1:]),
        Msg(ME, FLATS, 30, "2026-03-10T11:00:00Z", 2, "the balcony one please"),
    ],
)


@pytest.fixture(scope="module")
def conn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[db.Connection]:
    connection = build_store(Path(tmp_path_factory.mktemp("albums")), DATA)
    yield connection
    connection.close()


def _search(conn: db.Connection, query: str, **options: Any) -> list[dict[str, Any]]:
    request = SearchRequest(query, now=NOW, limit=50, **options)
    return [item.to_json() for item in search(conn, request).items]


def test_a_word_of_one_photo_finds_its_album_once_with_every_photo(conn: db.Connection) -> None:
    (hit,) = _search(conn, "garage")
    assert hit["msg_id"] == 23
    album = hit["album"]
    assert isinstance(album, list)
    assert [p["msg_id"] for p in album] == list(SECOND_ALBUM)
    assert [p["matched"] for p in album] == [False, False, False, True]
    assert album[3]["snippet"] == "[photo] **garage**"
    assert album[0]["text"] == "three rooms by the park"
    assert [p["media"]["text"] for p in album] == [READ_OUT[i] for i in SECOND_ALBUM]


def test_words_on_several_photos_of_an_album_are_still_one_hit_marking_each(
    conn: db.Connection,
) -> None:
    hits = _search(conn, "balcony")
    assert sorted(h["msg_id"] for h in hits if "album" not in h) == [1, 30]
    albums = [h for h in hits if "album" in h]
    assert len(albums) == 2
    matched = {tuple(p["msg_id"] for p in h["album"] if p["matched"]) for h in albums}
    assert matched == {(11, 12), (21,)}
    for hit in albums:
        assert hit["msg_id"] in (11, 12, 21)
        for photo in hit["album"]:
            assert ("**balcony**" in photo["snippet"]) == photo["matched"]


@pytest.mark.parametrize("newest", [False, True])
def test_pages_never_show_an_album_twice_and_lose_no_hit(conn: db.Connection, newest: bool) -> None:
    whole = _search(conn, "balcony OR kitchen OR rooms", newest=newest)
    seen: list[int] = []
    token = None
    while True:
        envelope = search(
            conn,
            SearchRequest(
                "balcony OR kitchen OR rooms", now=NOW, limit=1, page_token=token, newest=newest
            ),
        )
        seen.extend(item.msg_id for item in envelope.items)
        if not envelope.has_more:
            break
        token = envelope.next_page_token
    assert seen == [h["msg_id"] for h in whole]
    groups = [tuple(p["msg_id"] for p in h["album"])[0] for h in whole if "album" in h]
    assert sorted(groups) == [10, 20]
    assert sorted(h["msg_id"] for h in whole if "album" not in h) == [1, 30]
    assert len(whole) == 4


def test_a_message_outside_albums_has_no_album_field(conn: db.Connection) -> None:
    (hit,) = _search(conn, "please")
    assert hit["msg_id"] == 30 and "album" not in hit
