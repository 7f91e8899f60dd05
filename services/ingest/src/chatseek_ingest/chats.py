"""Resolving what a user types to name a chat, and reading chats with their coverage.

A chat spec is a marked id (``-1001234567890``), ``@username``, a ``t.me`` link
(``t.me/name``, ``t.me/c/<id>/<msg>``), ``folder:<name>``, ``import:<slug>``, or a title matched
by case-insensitive substring, then fuzzily. A spec matching nothing is ``ChatNotFound`` listing
what is stored; readers that need one chat get ``AmbiguousName`` with the candidates.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from chatseek_core.db import Connection
from chatseek_core.errors import AmbiguousName, ChatNotFound
from chatseek_core.text import normalise

__all__ = ["ChatRow", "list_chats", "resolve"]

FUZZY_CUTOFF = 0.6
CANDIDATES_SHOWN = 20
_TME = re.compile(r"^(?:https?://)?t(?:elegram)?\.me/(?:(c)/(\d+)|([A-Za-z0-9_]{3,}))(?:/.*)?$")


@dataclass(frozen=True)
class ChatRow:
    """A stored chat and how complete its history is."""

    account: str
    chat_id: int
    type: str
    title: str
    username: str | None
    source_id: str | None
    history_complete: bool
    last_fetched_at: int | None
    message_count: int

    def label(self) -> str:
        """``Title (id)`` for candidate lists."""
        return f"{self.title or '(untitled)'} ({self.chat_id})"


def list_chats(conn: Connection, accounts: Sequence[str] | None = None) -> list[ChatRow]:
    """Every stored chat of ``accounts`` (None: every account), by title."""
    sql = (
        "SELECT account, chat_id, type, title, username, source_id, history_complete,"
        " last_fetched_at, message_count FROM chats"
    )
    params: list[object] = []
    if accounts is not None:
        sql += f" WHERE account IN ({','.join('?' for _ in accounts)})"
        params.extend(accounts)
    sql += " ORDER BY title, chat_id"
    return [
        ChatRow(
            account=r[0],
            chat_id=int(r[1]),
            type=r[2],
            title=r[3],
            username=r[4],
            source_id=r[5],
            history_complete=bool(r[6]),
            last_fetched_at=r[7],
            message_count=int(r[8]),
        )
        for r in conn.execute(sql, params)
    ]


def _match(spec: str, chats: list[ChatRow]) -> list[ChatRow]:
    text = spec.strip()
    if re.fullmatch(r"-?\d+", text):
        wanted = int(text)
        exact = [c for c in chats if c.chat_id == wanted]
        if exact:
            return exact
        # A bare channel id without the -100 prefix, as t.me/c links show it.
        return [c for c in chats if c.chat_id == -(10**12 + wanted)]
    link = _TME.match(text)
    if link:
        if link.group(1):
            bare = int(link.group(2))
            return [c for c in chats if c.chat_id == -(10**12 + bare)]
        text = "@" + link.group(3)
    if text.startswith("@"):
        name = text[1:].lower()
        return [c for c in chats if (c.username or "").lower() == name]
    if text.startswith(("folder:", "import:")):
        source = text if text.startswith("import:") else f"folder:{text.split(':', 1)[1]}"
        return [c for c in chats if (c.source_id or "").lower() == source.lower()]
    needle = normalise(text)
    exact_title = [c for c in chats if normalise(c.title) == needle]
    if exact_title:
        return exact_title
    substring = [c for c in chats if needle and needle in normalise(c.title)]
    if substring:
        return substring
    titles = {normalise(c.title): c for c in chats if c.title}
    close = difflib.get_close_matches(needle, list(titles), n=5, cutoff=FUZZY_CUTOFF)
    return [titles[t] for t in close]


def resolve(
    conn: Connection,
    specs: Sequence[str],
    *,
    accounts: Sequence[str] | None = None,
    exactly_one: bool = False,
) -> list[ChatRow]:
    """The chats ``specs`` name, in order, without duplicates.

    Raises:
        ChatNotFound: a spec matches no stored chat (the error lists what is stored).
        AmbiguousName: ``exactly_one`` and a spec matches several chats.
    """
    chats = list_chats(conn, accounts)
    if not specs:
        return chats
    out: dict[tuple[str, int], ChatRow] = {}
    for spec in specs:
        found = _match(spec, chats)
        if not found:
            raise ChatNotFound(
                f"no stored chat matches {spec!r}",
                hint="name a chat by id, @username, t.me link, folder:, import: or title",
                candidates=[c.label() for c in chats[:CANDIDATES_SHOWN]],
                metadata={"spec": spec},
            )
        if exactly_one and len(found) > 1:
            raise AmbiguousName(
                f"{spec!r} matches {len(found)} chats",
                hint="use the chat id or @username",
                candidates=[c.label() for c in found[:CANDIDATES_SHOWN]],
                metadata={"spec": spec},
            )
        for chat in found:
            out[(chat.account, chat.chat_id)] = chat
    return list(out.values())
