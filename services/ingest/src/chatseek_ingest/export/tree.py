"""The partial document the push parser fills in, walked after every chunk it was fed.

Complete chats and messages are handed out and dropped from it, so memory stays bounded
whatever the export's size. Two shapes: a single-chat export (``name``/``type``/``id``/
``messages`` at the top) and an account export (``chats.list`` and ``left_chats.list``; other
sections are emptied as they stream). A chat's messages wait, at most ``max_pending``, for its
header keys.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from chatseek_ingest.export.chat import Chat, header_ready, make_header
from chatseek_ingest.export.message import message_records
from chatseek_ingest.export.parser import JsonFile
from chatseek_ingest.export.rescan import count_items, header_fields
from chatseek_ingest.export.source import malformed
from chatseek_ingest.model import ExportChat, ExportMessage, ExportWarning

__all__ = ["ExportRecord", "PartialTree"]

MAX_UNDECIDED_BYTES = 1024 * 1024
MAX_PRUNE_DEPTH = 4

ExportRecord = ExportChat | ExportMessage | ExportWarning

_CHAT_KEYS = frozenset({"name", "type", "id", "messages"})
_ACCOUNT_KEYS = frozenset(
    {
        "about",
        "personal_information",
        "profile_pictures",
        "stories",
        "profile_music",
        "contacts",
        "frequent_contacts",
        "sessions",
        "web_sessions",
        "other_data",
        "chats",
        "left_chats",
    }
)
_CHAT_SECTIONS = ("chats", "left_chats")


class PartialTree:
    """Walks the partial tree after each fed chunk; ``advance`` yields what became complete."""

    def __init__(
        self,
        root: dict[str, Any],
        label: str,
        open_json: Callable[[], JsonFile],
        root_real: str,
        max_pending: int,
    ) -> None:
        self._root = root
        self._label = label
        self._open_json = open_json
        self._root_real = root_real
        self._max_pending = max_pending
        self._shape: str | None = None
        self._chat: Chat | None = None
        self._next_index: dict[str, int] = {}
        self._section_consumed: dict[str, int] = {}

    def advance(self, final: bool, fed: int) -> Iterator[ExportRecord]:
        """The records completed since the last call; ``final`` once the document has ended.

        Raises:
            MalformedExport: a top level of neither shape (``fed`` bytes in), or a chat,
                section or message of the wrong JSON type.
        """
        if self._shape is None:
            self._shape = self._decide_shape(final, fed)
            if self._shape is None:
                return
        if self._shape == "chat":
            cur = self._chat or self._open_chat("", 0, self._root)
            yield from self._pump(cur, finished=final)
        else:
            yield from self._pump_account(final)

    def _decide_shape(self, final: bool, fed: int) -> str | None:
        for key in self._root:
            if key in _CHAT_KEYS:
                return "chat"
            if key in _ACCOUNT_KEYS:
                return "account"
        for value in self._root.values():
            _prune(value, MAX_PRUNE_DEPTH)
        if final or fed > MAX_UNDECIDED_BYTES:
            raise malformed(self._label, "top level", "the top-level object has neither shape")
        return None

    def _pump_account(self, final: bool) -> Iterator[ExportRecord]:
        root = self._root
        last = next(reversed(root)) if root else None
        for key in list(root):
            complete = final or key != last
            if key in _CHAT_SECTIONS:
                yield from self._pump_section(key, root[key], complete)
            elif not complete:
                _prune(root[key], MAX_PRUNE_DEPTH)
            if complete:
                del root[key]

    def _pump_section(self, name: str, section: object, complete: bool) -> Iterator[ExportRecord]:
        if type(section) is not dict:
            raise malformed(self._label, name, "expected an object holding a 'list' array")
        chats = section.get("list")
        if chats is None:
            return
        if type(chats) is not list:
            raise malformed(self._label, f"{name}.list", "expected an array of chats")
        list_done = complete or next(reversed(section)) != "list"
        while chats:
            obj = chats[0]
            finished = len(chats) > 1 or list_done
            cur = self._chat
            if cur is None or cur.obj is not obj:
                cur = self._open_chat(name, self._next_index.get(name, 0), obj)
            yield from self._pump(cur, finished)
            if not finished:
                return
            del chats[0]
            self._next_index[name] = cur.index + 1
            self._section_consumed[name] = self._section_consumed.get(name, 0) + cur.consumed
            self._chat = None

    def _open_chat(self, section: str, index: int, obj: object) -> Chat:
        if type(obj) is not dict:
            where = f"{section}.list[{index}]" if section else "top level"
            raise malformed(self._label, where, "expected a chat object")
        cur = Chat(section, index, obj)
        self._chat = cur
        return cur

    def _pump(self, cur: Chat, finished: bool) -> Iterator[ExportRecord]:
        obj = cur.obj
        if cur.header is None and not cur.skip and not cur.orphan:
            if header_ready(obj, finished):
                yield make_header(cur, obj, self._label)
            else:
                pending = obj.get("messages")
                if type(pending) is not list or len(pending) <= self._max_pending:
                    return
                fields, complete = header_fields(self._open_json, cur)
                if complete or ("id" in fields and "type" in fields):
                    yield make_header(cur, fields, self._label)
                else:
                    cur.orphan = True
        msgs = obj.get("messages")
        if msgs is None:
            return
        if type(msgs) is not list:
            raise malformed(
                self._label, f"{cur.location}.messages".lstrip("."), "expected an array"
            )
        closed = finished or next(reversed(obj)) != "messages"
        n = len(msgs) if closed else len(msgs) - 1
        if n <= 0:
            return
        batch = msgs[:n]
        del msgs[:n]
        base = cur.consumed
        cur.consumed += n
        if cur.skip or cur.orphan:
            return
        for offset, raw in enumerate(batch):
            yield from message_records(cur, raw, base + offset, self._root_real, self._label)

    def where(self, document_done: bool) -> str:
        """JSON path of the innermost chat or message the partial tree holds."""
        root = self._root
        if document_done:
            return "after the top-level object"
        if not root:
            return "top level"
        last = next(reversed(root))
        if last in _CHAT_KEYS and self._shape != "account":
            obj, location = root, ""
        elif last in _CHAT_SECTIONS and type(root[last]) is dict:
            chats = root[last].get("list")
            if type(chats) is not list or not chats or type(chats[-1]) is not dict:
                return f"{last}.list" if type(chats) is list else last
            obj = chats[-1]
            location = f"{last}.list[{self._next_index.get(last, 0) + len(chats) - 1}]"
        else:
            return last if self._shape == "account" else "top level"
        msgs = obj.get("messages")
        if type(msgs) is not list or not msgs or next(reversed(obj)) != "messages":
            return location or "top level"
        cur = self._chat
        done = cur.consumed if cur is not None and cur.obj is obj else 0
        index = done + len(msgs) - 1
        return f"{location}.messages[{index}]" if location else f"messages[{index}]"

    def finish_truncated(self, at: int) -> Iterator[ExportRecord]:
        """The complete messages of a file cut at byte ``at``, then one ``truncated`` warning."""
        cur = self._chat
        where = f"byte {at}"
        if cur is not None:
            msgs = cur.obj.get("messages")
            pending = msgs if type(msgs) is list else []
            complete = self._complete_count(cur, pending, at)
            if cur.header is None and not cur.skip and not cur.orphan:
                if "id" in cur.obj and "type" in cur.obj:
                    yield make_header(cur, cur.obj, self._label)
                else:
                    cur.orphan = True
            if cur.header is not None and not cur.skip and not cur.orphan:
                for offset, raw in enumerate(pending[:complete]):
                    yield from message_records(
                        cur, raw, cur.consumed + offset, self._root_real, self._label
                    )
            last = cur.consumed + complete - 1
            where = f"{cur.message_location(last) if last >= 0 else cur.location} ({where})"
            if cur.orphan:
                lost = cur.consumed + complete
                yield ExportWarning(
                    kind="skipped",
                    message=f"{lost} messages dropped: the file ends before their chat's id/type",
                    location=cur.location or "top level",
                )
        yield ExportWarning(
            kind="truncated",
            message=(
                f"{self._label} ends mid-write at byte {at}; "
                "everything up to the last complete message was read"
            ),
            chat_id=cur.chat_id if cur is not None else None,
            location=where.lstrip(". "),
        )

    def _complete_count(self, cur: Chat, pending: list[object], fed: int) -> int:
        """How many of ``pending`` (the undrained tail of a cut chat) are complete objects."""
        if not pending:
            return 0
        if next(reversed(cur.obj)) != "messages":
            return len(pending)
        prefix = f"{cur.section}.list.item.messages.item" if cur.section else "messages.item"
        total = count_items(self._open_json, fed, prefix)
        done_here = total - self._section_consumed.get(cur.section, 0) - cur.consumed
        return max(0, min(len(pending), done_here))


def _prune(value: object, depth: int) -> None:
    """Empty the arrays of a section nobody reads, so it never grows while it streams."""
    if type(value) is list:
        value.clear()
    elif type(value) is dict and depth > 0:
        for child in value.values():
            _prune(child, depth - 1)
