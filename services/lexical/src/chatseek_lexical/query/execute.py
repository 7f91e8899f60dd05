"""Strict message search: request → validated tree → scope → SQL → envelope, under budgets.

Invariants:
* The result set is exactly the Boolean query within the scope. Order: bm25 when every branch
  requires words, else (and whenever asked) newest first; ties by ``(account, chat, msg_id)``.
* An album is one hit: of the matching photos of one media group only the first in that order
  is an item (wherever the page boundaries fall), carrying every photo in ``album``, the
  matching ones marked and highlighted. Counts (``stats``) still count messages.
* Scope is the active account unless ``source``/``in:`` widen or pick one; names resolve in it.
  A query needing the word index while it is not ready is ``IndexNotReady``, never a fallback.
* Every budget, time included (SQLite's progress handler), ends the request with
  ``QueryLimit``; no partial page is returned. Page tokens are opaque keyset cursors bound to
  the query, scope, timezone and order, pinning the first page's "now".
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo

import chatseek_lexical.query.dates as dates
import chatseek_lexical.query.values as values
from chatseek_core.errors import ChatNotFound, IndexNotReady, InvalidValue
from chatseek_core.render import ALBUM_MAX
from chatseek_core.text import normalise
from chatseek_lexical.pools import POOL_FACTOR, POOL_GROWTH, POOL_MIN
from chatseek_lexical.query.ast import (
    LANGUAGE,
    TREE_VERSION,
    Bool,
    EnumValue,
    Leaf,
    Node,
    Tree,
    leaves,
)
from chatseek_lexical.query.compile import (
    Compiler,
    QueryConnection,
    Scope,
    Sql,
    needs_words,
    requires_words,
)
from chatseek_lexical.query.envelope import (
    AccountCoverage,
    AlbumPhoto,
    ChatCoverage,
    ChatRef,
    ContextMessage,
    Coverage,
    Envelope,
    Item,
    QueryInfo,
    SenderRef,
    iso_utc,
)
from chatseek_lexical.query.fields import FIELDS_VERSION
from chatseek_lexical.query.limits import (
    DEFAULT_BUDGETS,
    Budgets,
    Deadline,
    budgeted,
)
from chatseek_lexical.query.links import deep_link, locator
from chatseek_lexical.query.parser import parse
from chatseek_lexical.query.presets import PRESET_VERSION
from chatseek_lexical.query.split import Splitter, best_matches
from chatseek_lexical.query.tree_json import tree_from_json, tree_to_json
from chatseek_lexical.query.validate import invalid, validate

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_CONTEXT",
    "MAX_LIMIT",
    "ORDER_NEWEST",
    "ORDER_RELEVANCE",
    "Prepared",
    "SearchRequest",
    "budgeted",
    "prepare",
    "query_info",
    "search",
]

log = logging.getLogger(__name__)

DEFAULT_LIMIT = 20
MAX_LIMIT = 1000
MAX_CONTEXT = 20
SNIPPET_CHARS = 160
SNIPPET_LEAD = 50
MEDIA_TEXT_SHOWN = 300
TOKEN_VERSION = 1
ORDER_RELEVANCE = "relevance"
ORDER_NEWEST = "newest"
SOURCE_ACTIVE = "active"
SOURCE_ALL = "all"
_WORD = re.compile(r"[^\W_]+")
_ELLIPSIS = "…"


@dataclass(frozen=True, slots=True)
class SearchRequest:
    """One strict search (or count) request.

    Attributes:
        query: query text, a JSON tree object, or an already validated ``Tree``.
        account: the active account; None means the store's active account.
        source: ``active`` (default), ``all``, ``telegram`` or ``telegram/<account>``.
        chats: chat references (title, @username or id) to restrict to, resolved in scope.
        timezone: IANA timezone for calendar days; None means the system's.
        limit: page size, 1–1000.
        page_token: the ``next_page_token`` of the previous page.
        newest: order by time (newest first) even when relevance ordering applies.
        context: chronological neighbours to return before and after each hit (0–20).
        words_ready: whether the word index is complete (computed by the caller).
        now: unix seconds to treat as now (tests, replays); None means the clock.
        budgets: per-request ceilings; the profile's constants by default.
    """

    query: str | Mapping[str, Any] | Tree
    account: str | None = None
    source: str = SOURCE_ACTIVE
    chats: tuple[str, ...] = ()
    timezone: str | None = None
    limit: int = DEFAULT_LIMIT
    page_token: str | None = None
    newest: bool = False
    context: int = 0
    words_ready: bool = True
    now: float | None = None
    budgets: Budgets = field(default=DEFAULT_BUDGETS)


@dataclass(slots=True)
class Prepared:
    """Everything compiled for one request, shared by search and stats."""

    tree: Tree
    tz: ZoneInfo
    tz_name: str
    now: float
    scope: Scope
    compiler: Compiler
    where: Sql
    coverage: Coverage
    deadline: Deadline


# --- request helpers ---


def _tree(query: str | Mapping[str, Any] | Tree, budgets: Budgets) -> Tree:
    if isinstance(query, Tree):
        return validate(query, budgets)
    if isinstance(query, str):
        return parse(query, budgets)
    return validate(tree_from_json(query, budgets), budgets)


def _timezone(name: str | None) -> tuple[ZoneInfo, str]:
    try:
        return dates.resolve_timezone(name)
    except ValueError as exc:
        raise InvalidValue(
            f"invalid value for timezone: {exc}",
            hint="use an IANA name such as Europe/Madrid",
            metadata={"field": "timezone", "timezone": str(name)},
        ) from exc


def _required_leaves(root: Node) -> list[Leaf]:
    if isinstance(root, Bool):
        return [c for c in root.must if not isinstance(c, Bool)]
    return [root]


def _in_leaves(root: Node) -> list[EnumValue]:
    return [leaf for leaf in leaves(root) if isinstance(leaf, EnumValue) and leaf.field == "in"]


def _accounts_for(scope_value: values.ScopeValue, rows: list[tuple[str, str]]) -> list[str]:
    out = []
    for account, provider in rows:
        if scope_value.provider is not None and provider != scope_value.provider:
            continue
        if scope_value.account is not None and account != scope_value.account:
            continue
        out.append(account)
    return out


def _scope(conn: QueryConnection, request: SearchRequest, tree: Tree) -> Scope:
    rows = conn.execute(
        "SELECT account, provider, is_active FROM ingest.accounts ORDER BY account"
    ).fetchall()
    known = [(str(r[0]), str(r[1])) for r in rows]
    names = [a for a, _ in known]
    if request.account is not None and request.account not in names:
        raise InvalidValue(
            f"invalid value for account: {request.account!r} is not in the store",
            hint="pick one of the accounts listed as candidates",
            candidates=names,
        )
    for leaf in _in_leaves(tree.root):
        wanted = values.parse_in(leaf.value)
        if wanted.account is not None and not _accounts_for(wanted, known):
            raise invalid(
                "in",
                f"no account {wanted.account!r} in the store",
                leaf.span,
                candidates=tuple(names),
            )
    widen = bool(_in_leaves(tree.root))
    source = request.source
    if source == SOURCE_ALL or widen:
        accounts = names
    elif source == SOURCE_ACTIVE:
        active = [str(r[0]) for r in rows if r[2]]
        chosen = request.account or (active[0] if active else None)
        if chosen is None and len(names) == 1:
            chosen = names[0]
        accounts = [chosen] if chosen else []
    else:
        try:
            accounts = _accounts_for(values.parse_in(source), known)
        except ValueError as exc:
            raise InvalidValue(
                f"invalid value for source: {exc}",
                hint="use active, all, telegram or telegram/<account>",
            ) from exc
    resolution = list(accounts)
    for required in _required_leaves(tree.root):
        if isinstance(required, EnumValue) and required.field == "in":
            allowed = set(_accounts_for(values.parse_in(required.value), known))
            resolution = [a for a in resolution if a in allowed]
    return Scope(tuple(accounts), None, tuple(resolution))


def _chat_scope(compiler: Compiler, request: SearchRequest) -> tuple[tuple[str, int], ...] | None:
    if not request.chats:
        return None
    pairs: set[tuple[str, int]] = set()
    for ref in request.chats:
        chosen = compiler.resolve_name("chat", ref, (0, 0), compiler.load_chats())
        if not chosen:
            raise ChatNotFound(
                f"no chat {ref!r} in the searched accounts",
                hint="use the chat's title, @username or id; see chatseek chats list",
                metadata={"chat": ref},
            )
        pairs.update(p for c in chosen for p in c.pairs)
    return tuple(sorted(pairs))


def _check_topics(
    compiler: Compiler, tree: Tree, chats: tuple[tuple[str, int], ...] | None
) -> None:
    topics = [leaf for leaf in leaves(tree.root) if leaf.field == "topic"]
    if not topics:
        return
    required = [leaf for leaf in _required_leaves(tree.root) if leaf.field == "chat"]
    chat_ids: set[int] = set()
    if len(required) == 1:
        chat_ids = {chat_id for _, chat_id in compiler.chat_pairs(required[0])}
    elif not required and chats is not None:
        chat_ids = {chat_id for _, chat_id in chats}
    if len(chat_ids) != 1:
        raise invalid(
            "topic",
            "topic ids are per chat: add exactly one required chat:… clause naming one chat",
            topics[0].span,
            hint='e.g. chat:"Expats Madrid" AND topic:42',
        )


def _coverage(conn: QueryConnection, compiler: Compiler, tree: Tree, scope: Scope) -> Coverage:
    rows = conn.execute(
        "SELECT c.account, c.chat_id, c.title, c.type, c.history_complete, c.last_fetched_at"
        " FROM ingest.chats AS c WHERE c.account IN (SELECT value FROM json_each(?))"
        " ORDER BY c.account, c.chat_id",
        (json.dumps(list(scope.resolution_accounts)),),
    ).fetchall()
    allowed: set[tuple[str, int]] | None = set(scope.chats) if scope.chats is not None else None
    for leaf in _required_leaves(tree.root):
        if leaf.field == "chat":
            pairs = set(compiler.chat_pairs(leaf))
            allowed = pairs if allowed is None else allowed & pairs
    chats = tuple(
        ChatCoverage(str(r[0]), int(r[1]), str(r[2] or ""), str(r[3]), bool(r[4]), iso_utc(r[5]))
        for r in rows
        if allowed is None or (str(r[0]), int(r[1])) in allowed
    )
    providers = dict(
        conn.execute(
            "SELECT account, provider FROM ingest.accounts"
            " WHERE account IN (SELECT value FROM json_each(?))",
            (json.dumps(list(scope.resolution_accounts)),),
        ).fetchall()
    )
    accounts = tuple(
        AccountCoverage(
            account,
            str(providers.get(account, "telegram")),
            sum(1 for c in chats if c.account == account),
            sum(1 for c in chats if c.account == account and c.history_complete),
        )
        for account in scope.resolution_accounts
    )
    return Coverage(accounts, chats)


def prepare(
    conn: QueryConnection,
    request: SearchRequest,
    deadline: Deadline,
    *,
    now: float | None = None,
) -> Prepared:
    """Validate, scope and compile ``request``: the shared first half of search and stats.

    Run it inside ``budgeted(conn, deadline)`` so the time budget covers SQLite work too.

    Raises:
        The query errors of ``parse``/``validate``; IndexNotReady; InvalidValue (timezone,
        account, source, topic without one chat); ChatNotFound; AmbiguousName; QueryLimit.
    """
    budgets = request.budgets
    tree = _tree(request.query, budgets)
    if needs_words(tree.root) and not request.words_ready:
        raise IndexNotReady(
            "the word index is still being built; text terms cannot be answered yet",
            hint="wait for indexing to finish (chatseek status), or search without text terms",
        )
    tz, tz_name = _timezone(request.timezone)
    moment = now if now is not None else (request.now if request.now is not None else time.time())
    base = _scope(conn, request, tree)
    resolver = Compiler(conn, scope=base, tz=tz, now=moment, budgets=budgets, deadline=deadline)
    chats = _chat_scope(resolver, request)
    scope = Scope(base.accounts, chats, base.resolution_accounts)
    compiler = Compiler(conn, scope=scope, tz=tz, now=moment, budgets=budgets, deadline=deadline)
    _check_topics(compiler, tree, chats)
    deadline.check("compiling the query")
    compiler.evaluate_post_filters(tree.root)
    where = compiler.where(tree.root)
    coverage = _coverage(conn, compiler, tree, scope)
    return Prepared(tree, tz, tz_name, moment, scope, compiler, where, coverage, deadline)


# --- paging ---


def _strip_spans(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _strip_spans(v) for k, v in obj.items() if k != "span"}
    if isinstance(obj, list):
        return [_strip_spans(v) for v in obj]
    return obj


def _fingerprint(tree: Tree, scope: Scope, tz_name: str, order: str) -> str:
    payload = json.dumps(
        [
            _strip_spans(tree_to_json(tree)),
            list(scope.accounts),
            [list(p) for p in scope.chats] if scope.chats is not None else None,
            tz_name,
            order,
        ],
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.blake2b(payload.encode("utf-8"), digest_size=12).hexdigest()


def _encode_token(payload: dict[str, Any]) -> str:
    raw = json.dumps(payload, separators=(",", ":")).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _bad_token(reason: str) -> InvalidValue:
    return InvalidValue(
        f"invalid value for page token: {reason}",
        hint="pass the next_page_token of the previous page of the same query unchanged",
        metadata={"field": "page_token"},
    )


def _decode_token(token: str) -> dict[str, Any]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        payload = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise _bad_token("it is not a token this server issued") from exc
    if not isinstance(payload, dict) or payload.get("v") != TOKEN_VERSION:
        raise _bad_token("it is not a token this server issued")
    key = payload.get("k")
    ok = (
        isinstance(key, list)
        and len(key) == 4
        and isinstance(key[0], int | float)
        and isinstance(key[1], str)
        and all(isinstance(k, int) for k in key[2:])
        and isinstance(payload.get("p"), int)
        and isinstance(payload.get("n"), int | float)
        and isinstance(payload.get("h"), str)
    )
    if not ok:
        raise _bad_token("it is damaged")
    return payload


# --- items ---


def _snippet(text: str, terms: set[str]) -> str:
    first = None
    marks: list[tuple[int, int]] = []
    for found in _WORD.finditer(text):
        if normalise(found.group(0)) in terms:
            marks.append(found.span())
            if first is None:
                first = found.start()
    start = 0 if first is None else max(0, first - SNIPPET_LEAD)
    if start > 0:
        space = text.rfind(" ", 0, start)
        start = space + 1 if space >= 0 and start - space < SNIPPET_LEAD else start
    end = min(len(text), start + SNIPPET_CHARS)
    out = []
    cursor = start
    for low, high in marks:
        if low < start or high > end:
            continue
        out.append(text[cursor:low])
        out.append("**" + text[low:high] + "**")
        cursor = high
    out.append(text[cursor:end])
    body = " ".join("".join(out).split())
    return (_ELLIPSIS if start > 0 else "") + body + (_ELLIPSIS if end < len(text) else "")


def _context(
    conn: QueryConnection, account: str, chat_id: int, msg_id: int, size: int
) -> tuple[tuple[ContextMessage, ...], tuple[ContextMessage, ...]]:
    sides = []
    for op, direction in (("<", "DESC"), (">", "ASC")):
        rows = conn.execute(
            "SELECT m.msg_id, m.date, m.sender_id, m.sender_name, m.text"
            " FROM ingest.messages AS m WHERE m.account = ? AND m.chat_id = ?"
            f" AND m.msg_id {op} ? ORDER BY m.msg_id {direction} LIMIT ?",
            (account, chat_id, msg_id, size),
        ).fetchall()
        side = [
            ContextMessage(
                int(r[0]),
                locator(account, chat_id, int(r[0])),
                iso_utc(r[1]),
                SenderRef(None if r[2] is None else int(r[2]), str(r[3] or "")),
                str(r[4] or ""),
            )
            for r in rows
        ]
        sides.append(tuple(sorted(side, key=lambda c: c.msg_id)))
    return sides[0], sides[1]


def _media(kind: str | None, file_name: str | None, extracted: str) -> dict[str, Any] | None:
    if kind is None:
        return None
    return {"kind": kind, "file_name": file_name, "text": extracted[:MEDIA_TEXT_SHOWN]}


def _media_snippet(
    text: str, kind: str | None, file_name: str | None, extracted: str, terms: set[str]
) -> str:
    snippet = _snippet(text, terms)
    if kind is not None and extracted and "**" not in snippet:
        # The words matched what was read out of the attachment: show that part.
        label = f"[document: {file_name}]" if kind == "document" else f"[{kind}]"
        snippet = f"{label} {_snippet(extracted, terms)}"
    return snippet


def _album(
    conn: QueryConnection,
    account: str,
    chat_id: int,
    grouped_id: int,
    matched: set[int],
    terms: set[str],
) -> tuple[AlbumPhoto, ...]:
    rows = conn.execute(
        "SELECT m.mid, m.msg_id, m.text, md.kind, md.file_name, md.extracted_text"
        " FROM ingest.messages AS m LEFT JOIN ingest.media AS md ON md.mid = m.mid"
        " WHERE m.account = ? AND m.chat_id = ? AND m.grouped_id = ? ORDER BY m.msg_id",
        (account, chat_id, grouped_id),
    ).fetchall()
    photos = []
    for r in rows:
        text, extracted = str(r[2] or ""), str(r[5] or "")
        hit = int(r[0]) in matched
        photos.append(
            AlbumPhoto(
                msg_id=int(r[1]),
                locator=locator(account, chat_id, int(r[1])),
                text=text,
                snippet=_media_snippet(text, r[3], r[4], extracted, terms if hit else set()),
                media=_media(r[3], r[4], extracted),
                matched=hit,
            )
        )
    return tuple(photos)


def _items(
    conn: QueryConnection,
    mids: Sequence[int],
    terms: set[str],
    context: int,
    albums: Mapping[int, tuple[int, set[int]]] | None = None,
) -> tuple[Item, ...]:
    """The items of ``mids``; ``albums`` maps a hit in an album to its media group and the
    mids of the album's photos the query matched."""
    if not mids:
        return ()
    rows = conn.execute(
        "SELECT m.mid, m.account, m.chat_id, m.msg_id, m.date, m.text, m.sender_id,"
        " m.sender_name, m.topic_id, c.type, c.title, c.username, s.display_name,"
        " md.kind, md.file_name, md.extracted_text"
        " FROM ingest.messages AS m"
        " LEFT JOIN ingest.media AS md ON md.mid = m.mid"
        " LEFT JOIN ingest.chats AS c ON c.account = m.account AND c.chat_id = m.chat_id"
        " LEFT JOIN ingest.senders AS s ON s.account = m.account AND s.sender_id = m.sender_id"
        " WHERE m.mid IN (SELECT value FROM json_each(?))",
        (json.dumps(list(mids)),),
    ).fetchall()
    by_mid = {int(r[0]): r for r in rows}
    out = []
    for mid in mids:
        r = by_mid[mid]
        account, chat_id, msg_id = str(r[1]), int(r[2]), int(r[3])
        text = str(r[5] or "")
        topic = None if r[8] is None else int(r[8])
        chat_type = str(r[9] or "unknown")
        username = str(r[11]) if r[11] else None
        link, fallback = deep_link(chat_type, chat_id, username, msg_id, topic)
        extracted = str(r[15] or "")
        media = _media(r[13], r[14], extracted)
        snippet = _media_snippet(text, r[13], r[14], extracted, terms)
        album = None
        if albums and mid in albums:
            grouped_id, matched = albums[mid]
            album = _album(conn, account, chat_id, grouped_id, matched, terms)
        before = after = None
        if context:
            before, after = _context(conn, account, chat_id, msg_id, context)
        out.append(
            Item(
                account=account,
                chat_id=chat_id,
                msg_id=msg_id,
                locator=locator(account, chat_id, msg_id),
                chat=ChatRef(chat_id, chat_type, str(r[10] or ""), username),
                sender=SenderRef(None if r[6] is None else int(r[6]), str(r[12] or r[7] or "")),
                date=iso_utc(r[4]),
                text=text,
                snippet=snippet,
                media=media,
                link=link,
                fallback_link=fallback,
                topic_id=topic,
                context_before=before,
                context_after=after,
                album=album,
            )
        )
    return tuple(out)


def query_info(prepared: Prepared, order: str) -> QueryInfo:
    """The ``query`` block of an envelope for ``prepared`` run in ``order``."""
    return QueryInfo(
        LANGUAGE, TREE_VERSION, FIELDS_VERSION, PRESET_VERSION, prepared.tz_name, order
    )


def _check_request(request: SearchRequest) -> None:
    if not 1 <= request.limit <= MAX_LIMIT:
        raise InvalidValue(
            f"invalid value for limit: {request.limit} is outside 1..{MAX_LIMIT}",
            hint=f"ask for at most {MAX_LIMIT} hits per page and use the page token",
            metadata={"field": "limit"},
        )
    if not 0 <= request.context <= MAX_CONTEXT:
        raise InvalidValue(
            f"invalid value for context: {request.context} is outside 0..{MAX_CONTEXT}",
            hint=f"ask for at most {MAX_CONTEXT} neighbours on each side",
            metadata={"field": "context"},
        )


def search(
    conn: QueryConnection, request: SearchRequest, *, splitter: Splitter | None = None
) -> Envelope:
    """Run one strict message search and return its envelope.

    Args:
        conn: lexical.db with ingest.db attached read-only as ``ingest``.
        request: the query, scope, paging and options.
        splitter: scores a relevance page's matches on several cores (``split``); without
            one, on ``conn`` alone. The results are the same.

    Raises:
        QuerySyntaxError, UnknownField, InvalidValue, UnsupportedOperator, UnsupportedRegex,
        AmbiguousName, QueryLimit, IndexNotReady, ChatNotFound: each with a reason and hint.
    """
    _check_request(request)
    token = _decode_token(request.page_token) if request.page_token else None
    pinned = float(token["n"]) if token else None
    deadline = Deadline(request.budgets.time_ms)
    with budgeted(conn, deadline):
        prepared = prepare(conn, request, deadline, now=pinned)
        root = prepared.tree.root
        rank = None if request.newest else prepared.compiler.rank_query(root)
        order = ORDER_RELEVANCE if rank and requires_words(root) else ORDER_NEWEST
        fingerprint = _fingerprint(prepared.tree, prepared.scope, prepared.tz_name, order)
        if token is not None and token["h"] != fingerprint:
            raise _bad_token("it belongs to a different query, scope, timezone or order")
        rows, albums = _album_page(conn, prepared, order, rank, token, request.limit, splitter)
        has_more = len(rows) > request.limit
        rows = rows[: request.limit]
        page = int(token["p"]) + 1 if token else 1
        next_token = None
        if has_more:
            last = rows[-1]
            next_token = _encode_token(
                {
                    "v": TOKEN_VERSION,
                    "h": fingerprint,
                    "k": [last[4], last[1], last[2], last[3]],
                    "p": page,
                    "n": prepared.now,
                }
            )
        terms = prepared.compiler.highlight_terms(root)
        items = _items(conn, [int(r[0]) for r in rows], terms, request.context, albums)
    log.info(
        "strict search: %d hits on page %d (order %s, %d candidates checked)",
        len(items),
        page,
        order,
        prepared.compiler.candidates_used,
    )
    return Envelope(
        items=items,
        page=page,
        limit=request.limit,
        has_more=has_more,
        next_page_token=next_token,
        query=query_info(prepared, order),
        words_ready=request.words_ready,
        coverage=prepared.coverage,
    )


def _album_page(
    conn: QueryConnection,
    prepared: Prepared,
    order: str,
    rank: str | None,
    token: dict[str, Any] | None,
    limit: int,
    splitter: Splitter | None = None,
) -> tuple[list[tuple[Any, ...]], dict[int, tuple[int, set[int]]]]:
    """Up to ``limit + 1`` hits after ``token``, an album's matching photos as one hit.

    A hit in an album stays only when it is the first of the album's matching photos in the
    page order; the others are skipped (their first came earlier, on this page or before), and
    more rows are read until the page is full or the matches run out.

    Returns:
        The rows as ``_page`` gives them, and for each kept album hit (by mid) its media
        group and the mids of the album's matching photos.
    """
    kept: list[tuple[Any, ...]] = []
    albums: dict[int, tuple[int, set[int]]] = {}
    seen: dict[tuple[str, int, int], int] = {}
    cursor = token
    while len(kept) <= limit:
        want = limit + 1 - len(kept)
        rows = _page(conn, prepared, order, rank, cursor, want - 1, splitter)
        groups = _groups_of(conn, [int(r[0]) for r in rows])
        for row in rows:
            mid = int(row[0])
            if mid not in groups:
                kept.append(row)
                continue
            key = (str(row[1]), int(row[2]), groups[mid])
            if key not in seen:
                album = _page(conn, prepared, order, rank, None, ALBUM_MAX, splitter, album=key)
                seen[key] = int(album[0][0])
                if seen[key] == mid:
                    albums[mid] = (key[2], {int(a[0]) for a in album})
            if seen[key] == mid:
                kept.append(row)
        if len(rows) < want:
            break
        last = rows[-1]
        cursor = {"k": [last[4], last[1], last[2], last[3]]}
    return kept, albums


def _groups_of(conn: QueryConnection, mids: Sequence[int]) -> dict[int, int]:
    """The media group of each of ``mids`` that is in an album."""
    if not mids:
        return {}
    rows = conn.execute(
        "SELECT mid, grouped_id FROM ingest.messages"
        " WHERE mid IN (SELECT value FROM json_each(?)) AND grouped_id IS NOT NULL",
        (json.dumps(list(mids)),),
    ).fetchall()
    return {int(r[0]): int(r[1]) for r in rows}


def _relevance_page(
    conn: QueryConnection,
    text: str,
    params: list[Any],
    rank: str | None,
    token: dict[str, Any] | None,
    limit: int,
    deadline: Deadline,
    splitter: Splitter | None,
) -> list[tuple[Any, ...]]:
    """Up to ``limit + 1`` matches in bm25 order after ``token``, joining few messages.

    The filters need each match's message row, and reading one costs far more than scoring it,
    so the ``pool`` best-scored matches are joined first. That page is the true one when the pool
    held every match, or when the page's last row scores below the pool's worst: every row that
    sorts before it scores below the pool's worst too, and the pool holds all of those. Otherwise
    the pool grows, until it holds every match.
    """
    assert rank is not None, "a relevance page needs the bm25 query"
    after = ""
    tail: list[Any] = []
    floor: float | None = None
    if token is not None:
        after = " AND (r.score, m.account, m.chat_id, m.msg_id) > (?, ?, ?, ?)"
        tail = list(token["k"])
        floor = float(tail[0])
    pool = max(POOL_MIN, POOL_FACTOR * (limit + 1))
    while True:
        if splitter is not None:
            best = splitter.best(conn, rank, floor, pool, deadline)
        else:
            best = best_matches(conn, rank, floor, pool)
        sql = (
            "SELECT m.mid, m.account, m.chat_id, m.msg_id, r.score"
            " FROM (SELECT value ->> 0 AS rid, value ->> 1 AS score FROM json_each(?)) AS r"
            f" JOIN ingest.messages AS m ON m.mid = r.rid WHERE {text}{after}"
            " ORDER BY r.score, m.account, m.chat_id, m.msg_id LIMIT ?"
        )
        pairs = json.dumps(best)
        rows = [tuple(r) for r in conn.execute(sql, [pairs, *params, *tail, limit + 1])]
        if len(best) < pool or (len(rows) > limit and rows[-1][4] < best[-1][1]):
            return rows
        pool *= POOL_GROWTH


def _page(
    conn: QueryConnection,
    prepared: Prepared,
    order: str,
    rank: str | None,
    token: dict[str, Any] | None,
    limit: int,
    splitter: Splitter | None = None,
    *,
    album: tuple[str, int, int] | None = None,
) -> list[tuple[Any, ...]]:
    """Up to ``limit + 1`` matching rows after ``token``; ``album`` keeps one media group's."""
    where = prepared.where
    if order == ORDER_RELEVANCE:
        where = prepared.compiler.pool_where(prepared.tree.root)
    params: list[Any] = []
    text = where.text
    if album is not None:
        text = f"({where.text}) AND m.account = ? AND m.chat_id = ? AND m.grouped_id = ?"
    if order == ORDER_RELEVANCE:
        return _relevance_page(
            conn,
            text,
            [*where.params, *(album or ())],
            rank,
            token,
            limit,
            prepared.deadline,
            splitter,
        )
    else:
        sql = (
            "SELECT m.mid, m.account, m.chat_id, m.msg_id, m.date FROM ingest.messages AS m"
            f" WHERE {text}"
        )
        params.extend(where.params)
        params.extend(album or ())
        if token is not None:
            sql += " AND (m.date, m.account, m.chat_id, m.msg_id) < (?, ?, ?, ?)"
            params.extend(token["k"])
        sql += " ORDER BY m.date DESC, m.account DESC, m.chat_id DESC, m.msg_id DESC LIMIT ?"
    params.append(limit + 1)
    return [tuple(r) for r in conn.execute(sql, params).fetchall()]
