"""Second streaming passes over the JSON file, for what the first pass has already dropped.

Both read the file again from its start in bounded memory and never raise on bad JSON: they
report what they found before it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import closing

import ijson

from chatseek_ingest.export.chat import Chat
from chatseek_ingest.export.nesting import NestingLimited
from chatseek_ingest.export.parser import (
    CHUNK_BYTES,
    PARSE_ERRORS,
    JsonFile,
    parse_events,
    pipeline,
    skip_bom,
)

__all__ = ["count_items", "header_fields"]

log = logging.getLogger(__name__)


def header_fields(open_json: Callable[[], JsonFile], cur: Chat) -> tuple[dict[str, object], bool]:
    """Read a chat's header keys with a second streaming pass (keys after ``messages``).

    Returns:
        The header fields found and whether the chat object was read to its end.
    """
    item = f"{cur.section}.list.item" if cur.section else ""
    wanted = {(f"{item}.{key}" if item else key): key for key in ("name", "type", "id")}
    seen = -1 if cur.section else 0
    fields: dict[str, object] = {}
    log.debug("chat %s: header follows its messages; looking it up", cur.location or "root")
    with closing(open_json()) as f:
        skip_bom(f)
        try:
            for prefix, event, value in parse_events(NestingLimited(f)):
                if prefix == item:
                    if event == "start_map" and cur.section:
                        seen += 1
                    elif event == "end_map" and seen == cur.index:
                        return fields, True
                elif seen == cur.index and event not in ("start_map", "start_array"):
                    key = wanted.get(prefix)
                    if key is not None and event != "map_key":
                        fields[key] = value
        except PARSE_ERRORS:
            pass
    return fields, False


def count_items(open_json: Callable[[], JsonFile], fed: int, prefix: str) -> int:
    """Complete values at ``prefix`` in the first ``fed`` bytes of the file (a counting pass)."""
    out = ijson.sendable_list()
    feed = pipeline(out, prefix)
    count = 0
    with closing(open_json()) as f:
        left = fed - skip_bom(f)
        try:
            while left > 0:
                chunk = f.read(min(CHUNK_BYTES, left))
                if not chunk:
                    break
                left -= len(chunk)
                feed.send(chunk)
                count += len(out)
                del out[:]
            feed.close()
        except PARSE_ERRORS:
            pass
    return count + len(out)
