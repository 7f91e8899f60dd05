"""Typed tree → one parameterised SQL condition over ``ingest.messages AS m``.

Invariants:
* No user text is ever part of an SQL string: values, FTS5 queries (double-quoted terms, ``"``
  doubled) and JSON lists (read with ``json_each``) travel as parameters.
* Every leaf condition is NULL-free, so ``NOT`` is exact. Text without words is void (dropped,
  as Lucene drops it); a group of only prohibited clauses matches nothing.
* ``text`` patterns and ranges expand through ``msg_vocab`` within the expansion budget; body
  regexes and presets are post-filters run in batches over the candidates their required
  context allows, under the candidate, scanned-bytes and time budgets.
* Names resolve in the resolution scope; several different senders/chats → ``AmbiguousName``.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from zoneinfo import ZoneInfo

import chatseek_lexical.query.dates as dates
import chatseek_lexical.query.presets as presets
import chatseek_lexical.query.values as values
from chatseek_core.errors import AmbiguousName
from chatseek_core.text import normalise, words
from chatseek_lexical.query.ast import (
    Bool,
    Compare,
    EnumValue,
    Leaf,
    MatchAll,
    Node,
    Phrase,
    Prefix,
    Range,
    Regex,
    Term,
    Wildcard,
)
from chatseek_lexical.query.limits import Budgets, Deadline, exceeded
from chatseek_lexical.query.links import GENERAL_TOPIC, MARKED_CHANNEL_BASE
from chatseek_lexical.query.patterns import (
    Pattern,
    compile_regex,
    compile_wildcard,
    fold,
    prefix_successor,
    wildcard_glob,
)
from chatseek_lexical.query.validate import invalid

__all__ = [
    "FALSE",
    "TRUE",
    "Compiler",
    "QueryConnection",
    "Scope",
    "Sql",
    "is_void",
    "needs_words",
    "requires_words",
]

log = logging.getLogger(__name__)

VOCAB_FETCH = 2000
POST_FILTER_BATCH = 1000
DOMAIN_FETCH = 5000
TEXT_FIELD = "text"
FTS_COLUMN = "raw"
CHAT_GROUP_TYPES = ("group", "supergroup", "forum")
KNOWN_CHAT_TYPES = ("private", "saved", "bot", "group", "supergroup", "forum", "channel")
KIND_CHAT_TYPES = {
    "private": ("private",),
    "saved": ("saved",),
    "bot": ("bot",),
    "group": CHAT_GROUP_TYPES,
    "channel": ("channel",),
}
HAS_MEDIA_KINDS = {
    "file": ("document",),
    "photo": ("photo",),
    "video": ("video", "video_note"),
    "audio": ("audio",),
    "voice": ("voice",),
    "sticker": ("sticker",),
    "contact": ("contact",),
    "location": ("location", "venue"),
    "poll": ("poll",),
}
MEDIA_COLUMNS = {"filename": "file_name", "mime": "mime"}
TAG_TARGETS = ("message", "chat", "sender")
_OPS = {">=": ">=", ">": ">", "<=": "<=", "<": "<"}


class QueryConnection(Protocol):
    """What the engine needs of a connection: lexical.db with ingest.db attached as ``ingest``."""

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Any: ...

    def set_progress_handler(self, handler: Callable[[], int] | None, n: int, /) -> None: ...


@dataclass(frozen=True, slots=True)
class Sql:
    """A condition (or query) and its parameters, in placeholder order."""

    text: str
    params: tuple[Any, ...] = ()


TRUE = Sql("1")
FALSE = Sql("0")


def _and(parts: Sequence[Sql]) -> Sql:
    if not parts:
        return TRUE
    if len(parts) == 1:
        return parts[0]
    return Sql(
        "(" + " AND ".join(p.text for p in parts) + ")",
        tuple(x for p in parts for x in p.params),
    )


def _or(parts: Sequence[Sql]) -> Sql:
    if len(parts) == 1:
        return parts[0]
    return Sql(
        "(" + " OR ".join(p.text for p in parts) + ")",
        tuple(x for p in parts for x in p.params),
    )


def _not(part: Sql) -> Sql:
    return Sql(f"NOT {part.text}", part.params)


def _json(items: Iterable[Any]) -> str:
    return json.dumps(list(items), ensure_ascii=False)


def _fts_quote(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _glob_literal(text: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


@dataclass(frozen=True, slots=True)
class Scope:
    """Who is searched: ``accounts``; ``chats`` narrows to (account, chat_id) pairs when set.

    ``resolution_accounts`` is where names (``from:``, ``chat:``) are looked up.
    """

    accounts: tuple[str, ...]
    chats: tuple[tuple[str, int], ...] | None
    resolution_accounts: tuple[str, ...]


class _Pending(Exception):
    """A post-filter leaf whose id set is not computed yet."""


def is_void(node: Node) -> bool:
    """True when ``node`` constrains nothing: text without words, or a group of such."""
    if isinstance(node, Bool):
        return all(is_void(child) for child in node.must + node.should + node.must_not)
    if isinstance(node, Term | Phrase) and node.field == TEXT_FIELD:
        return not words(node.value)
    return False


def _is_text(node: Node) -> bool:
    return not isinstance(node, Bool | MatchAll) and node.field == TEXT_FIELD


def needs_words(node: Node) -> bool:
    """Whether evaluating ``node`` needs the word index (any non-void ``text`` leaf)."""
    if isinstance(node, Bool):
        return any(needs_words(child) for child in node.must + node.should + node.must_not)
    return _is_text(node) and not is_void(node)


def requires_words(node: Node) -> bool:
    """Whether every message ``node`` matches must match a positive ``text`` leaf."""
    if isinstance(node, Bool):
        must = [c for c in node.must if not is_void(c)]
        should = [c for c in node.should if not is_void(c)]
        if must:
            return any(requires_words(c) for c in must)
        if should:
            return all(requires_words(c) for c in should)
        return True
    return _is_text(node) and not is_void(node)


def _all_required(node: Node) -> bool:
    """Whether every positive ``text`` leaf of ``node`` must match for ``node`` to match.

    True for a text leaf, a non-text leaf, and a group whose optional clauses hold no text and
    whose required clauses are all so themselves; void leaves count as text that may not match.
    """
    if not isinstance(node, Bool):
        return not (_is_text(node) and is_void(node))
    if any(_has_text(c) for c in node.should):
        return False
    return all(_all_required(c) for c in node.must)


def _has_text(node: Node) -> bool:
    if isinstance(node, Bool):
        return any(_has_text(c) for c in node.must + node.should)
    return _is_text(node)


def _is_post_filter(node: Node) -> bool:
    if isinstance(node, Regex) and node.field == "body":
        return True
    return isinstance(node, EnumValue) and node.field == "preset"


@dataclass(frozen=True, slots=True)
class _Named:
    key: Any
    ident: int
    name: str
    username: str
    pairs: tuple[tuple[str, int], ...] = ()


class Compiler:
    """Compiles one validated tree for one request (scope, timezone, now, budgets).

    Expansions, resolutions and post-filter id sets are computed once per leaf and cached.
    """

    def __init__(
        self,
        conn: QueryConnection,
        *,
        scope: Scope,
        tz: ZoneInfo,
        now: float,
        budgets: Budgets,
        deadline: Deadline,
    ) -> None:
        self.conn = conn
        self.scope = scope
        self.tz = tz
        self.now = now
        self.budgets = budgets
        self.deadline = deadline
        self.leaf_sets: dict[int, list[int]] = {}
        self.candidates_used = 0
        self.bytes_scanned = 0
        self._fts_cache: dict[int, str | None] = {}
        self._terms: dict[int, list[str]] = {}
        self._pred_cache: dict[int, Sql | None] = {}
        # While ``pool_where`` compiles: the text leaves known true (None otherwise).
        self._known: frozenset[int] | None = None
        self._pool_where: dict[int, Sql] = {}
        self._senders: list[_Named] | None = None
        self._chats: list[_Named] | None = None

    # --- scope ---

    def scope_sql(self) -> Sql:
        """The scope condition: the searched accounts and, when set, chats."""
        parts = [
            Sql("m.account IN (SELECT value FROM json_each(?))", (_json(self.scope.accounts),))
        ]
        if self.scope.chats is not None:
            parts.append(
                Sql(
                    "(m.account, m.chat_id) IN (SELECT value ->> 0, value ->> 1 FROM json_each(?))",
                    (_json([list(p) for p in self.scope.chats]),),
                )
            )
        return _and(parts)

    def where(self, root: Node) -> Sql:
        """Scope AND the whole tree (a void tree matches nothing)."""
        predicate = self.predicate(root)
        return _and([self.scope_sql(), FALSE if predicate is None else predicate])

    def pool_where(self, root: Node) -> Sql:
        """``where(root)`` for a few rows drawn from the matches of ``rank_query(root)``.

        A relevance page joins only its best-scored matches (see ``execute._relevance_page``),
        and ``where``'s text conditions would each gather every match of their words first. Here
        a text leaf is checked row by row against msg_fts instead, and when the rank query
        requires every positive text leaf, those leaves hold for each of the rows already.
        """
        key = id(root)
        if key not in self._pool_where:
            leaves = self._positive_text(root)
            known = {id(leaf) for leaf in leaves} if self._ranks_all(root, leaves) else set()
            saved = self._pred_cache
            self._pred_cache, self._known = {}, frozenset(known)
            try:
                self._pool_where[key] = self.where(root)
            finally:
                self._pred_cache, self._known = saved, None
        return self._pool_where[key]

    # --- nodes ---

    def predicate(self, node: Node) -> Sql | None:
        """The condition for ``node``; None when it is void."""
        key = id(node)
        if key in self._pred_cache:
            return self._pred_cache[key]
        if isinstance(node, Bool):
            result = self._bool(node)
        else:
            result = self._leaf(node)
        self._pred_cache[key] = result
        return result

    def _bool(self, node: Bool) -> Sql | None:
        must = [p for p in (self.predicate(c) for c in node.must) if p is not None]
        should = [p for p in (self.predicate(c) for c in node.should) if p is not None]
        must_not = [p for p in (self.predicate(c) for c in node.must_not) if p is not None]
        if not must and not should:
            return FALSE if must_not else None
        parts = list(must)
        if not must:
            parts.append(_or(should))
        parts.extend(_not(p) for p in must_not)
        return _and(parts)

    def _leaf(self, leaf: Leaf) -> Sql | None:
        if isinstance(leaf, MatchAll):
            return TRUE
        if _is_post_filter(leaf):
            if id(leaf) not in self.leaf_sets:
                raise _Pending()
            return Sql(
                "m.mid IN (SELECT value FROM json_each(?))", (_json(self.leaf_sets[id(leaf)]),)
            )
        field = leaf.field
        if field == TEXT_FIELD:
            fts = self.fts(leaf)
            if fts is None:
                return None
            if not fts:
                return FALSE
            if self._known is not None:
                if id(leaf) in self._known:
                    return TRUE
                return Sql(
                    "EXISTS (SELECT 1 FROM msg_fts WHERE msg_fts MATCH ? AND rowid = m.mid)", (fts,)
                )
            return Sql("m.mid IN (SELECT rowid FROM msg_fts WHERE msg_fts MATCH ?)", (fts,))
        handler = {
            "body": self._body,
            "from": self._from,
            "chat": self._chat,
            "date": self._date,
            "kind": self._kind,
            "has": self._has,
            "topic": self._topic,
            "in": self._in,
            "filename": self._media_text,
            "mime": self._media_text,
            "size": self._size,
            "tag": self._tag,
        }[field]
        return handler(leaf)

    # --- text ---

    def fts(self, leaf: Leaf) -> str | None:
        """The FTS5 query of a ``text`` leaf: None if void, "" if it can match nothing."""
        key = id(leaf)
        if key not in self._fts_cache:
            self._fts_cache[key] = self._fts(leaf)
        return self._fts_cache[key]

    def _fts(self, leaf: Leaf) -> str | None:
        if isinstance(leaf, Term | Phrase):
            tokens = words(leaf.value)
            if not tokens:
                return None
            self._terms[id(leaf)] = tokens
            if isinstance(leaf, Phrase):
                return f"{FTS_COLUMN} : {_fts_quote(' '.join(tokens))}"
            return f"{FTS_COLUMN} : (" + " AND ".join(_fts_quote(t) for t in tokens) + ")"
        terms = self._expand(leaf)
        self._terms[id(leaf)] = terms
        if not terms:
            return ""
        return f"{FTS_COLUMN} : (" + " OR ".join(_fts_quote(t) for t in terms) + ")"

    def _vocab(self, low: str | None, high: str | None, low_strict: bool, high_incl: bool) -> Any:
        conditions = []
        params: list[Any] = []
        if low is not None:
            conditions.append("term > ?" if low_strict else "term >= ?")
            params.append(low)
        if high is not None:
            conditions.append("term <= ?" if high_incl else "term < ?")
            params.append(high)
        where = (" WHERE " + " AND ".join(conditions)) if conditions else ""
        return self.conn.execute("SELECT term FROM msg_vocab" + where, params)

    def _expand(self, leaf: Leaf) -> list[str]:
        pattern: Pattern | None = None
        low: str | None
        high: str | None
        low_strict, high_incl = False, False
        if isinstance(leaf, Range):
            low = fold(leaf.lower).strip() if leaf.lower is not None else None
            high = fold(leaf.upper).strip() if leaf.upper is not None else None
            low_strict, high_incl = not leaf.include_lower, leaf.include_upper
        else:
            if isinstance(leaf, Prefix):
                prefix = fold(leaf.value)
            elif isinstance(leaf, Wildcard):
                pattern = compile_wildcard(leaf.pattern, leaf.span, self.budgets, folded=True)
                prefix = pattern.prefix
            else:
                assert isinstance(leaf, Regex)
                pattern = compile_regex(leaf.pattern, leaf.span, self.budgets)
                prefix = pattern.prefix
            low = prefix or None
            high = prefix_successor(prefix) if prefix else None
        cursor = self._vocab(low, high, low_strict, high_incl)
        matched: list[str] = []
        limit = self.budgets.vocabulary_expansions
        while True:
            rows = cursor.fetchmany(VOCAB_FETCH)
            if not rows:
                return matched
            for (term,) in rows:
                if pattern is not None and not pattern.matches(term):
                    continue
                matched.append(term)
                if len(matched) > limit:
                    raise exceeded(
                        "vocabulary_expansions",
                        limit,
                        "the pattern matches too many words",
                        leaf.span,
                    )
            self.deadline.check("expanding a pattern through the vocabulary")

    # --- body, media text, tags ---

    def _body(self, leaf: Leaf) -> Sql:
        if isinstance(leaf, Term | Phrase):
            return Sql("m.text = ?", (leaf.value,))
        if isinstance(leaf, Prefix):
            return Sql("m.text GLOB ?", (_glob_literal(leaf.value) + "*",))
        if isinstance(leaf, Wildcard):
            return Sql("m.text GLOB ?", (wildcard_glob(leaf.pattern, folded=False),))
        assert isinstance(leaf, Range)
        return _and(self._text_range("m.text", leaf))

    def _text_range(self, column: str, leaf: Range, *, folded: bool = False) -> list[Sql]:
        target = f"lower({column})" if folded else column
        value = "lower(?)" if folded else "?"
        parts = []
        if leaf.lower is not None:
            op = ">=" if leaf.include_lower else ">"
            parts.append(Sql(f"{target} {op} {value}", (leaf.lower,)))
        if leaf.upper is not None:
            op = "<=" if leaf.include_upper else "<"
            parts.append(Sql(f"{target} {op} {value}", (leaf.upper,)))
        return parts

    def _keyword_condition(self, column: str, leaf: Leaf, domain: Callable[[], list[str]]) -> Sql:
        """A condition on a case-insensitive keyword ``column`` (inside a subquery)."""
        if isinstance(leaf, Term | Phrase):
            return Sql(f"({column} = ? OR lower({column}) = lower(?))", (leaf.value, leaf.value))
        if isinstance(leaf, Prefix | Wildcard):
            if isinstance(leaf, Prefix):
                glob = _glob_literal(leaf.value) + "*"
            else:
                glob = wildcard_glob(leaf.pattern, folded=False)
            return Sql(f"({column} GLOB ? OR lower({column}) GLOB lower(?))", (glob, glob))
        if isinstance(leaf, Range):
            return _and(
                [Sql(f"{column} IS NOT NULL"), *self._text_range(column, leaf, folded=True)]
            )
        assert isinstance(leaf, Regex)
        pattern = compile_regex(leaf.pattern, leaf.span, self.budgets)
        chosen = [value for value in domain() if pattern.matches(value)]
        return Sql(f"{column} IN (SELECT value FROM json_each(?))", (_json(chosen),))

    def _domain(self, sql: Sql, leaf: Leaf) -> list[str]:
        cursor = self.conn.execute(sql.text, sql.params)
        out: list[str] = []
        while True:
            rows = cursor.fetchmany(DOMAIN_FETCH)
            if not rows:
                return out
            out.extend(str(row[0]) for row in rows)
            if len(out) > self.budgets.candidates:
                raise exceeded(
                    "candidates", self.budgets.candidates, "too many values to scan", leaf.span
                )
            self.deadline.check("scanning values for a pattern")

    def _media_text(self, leaf: Leaf) -> Sql:
        column = MEDIA_COLUMNS[leaf.field]
        scope = self.scope_sql()

        def domain() -> list[str]:
            return self._domain(
                Sql(
                    f"SELECT DISTINCT md.{column} FROM ingest.media AS md"
                    " JOIN ingest.messages AS m ON m.mid = md.mid"
                    f" WHERE md.{column} IS NOT NULL AND {scope.text}",
                    scope.params,
                ),
                leaf,
            )

        condition = self._keyword_condition(column, leaf, domain)
        return Sql(
            f"m.mid IN (SELECT mid FROM ingest.media WHERE {condition.text})", condition.params
        )

    def _tag(self, leaf: Leaf) -> Sql:
        accounts = _json(self.scope.accounts)

        def domain() -> list[str]:
            return self._domain(
                Sql(
                    "SELECT DISTINCT tag FROM ingest.tags"
                    " WHERE account IN (SELECT value FROM json_each(?))",
                    (accounts,),
                ),
                leaf,
            )

        cond = self._keyword_condition("tag", leaf, domain)
        message, chat, sender = TAG_TARGETS
        return Sql(
            "((m.account, m.chat_id, m.msg_id) IN (SELECT account, chat_id, msg_id"
            f" FROM ingest.tags WHERE target = ? AND {cond.text})"
            " OR (m.account, m.chat_id) IN (SELECT account, chat_id"
            f" FROM ingest.tags WHERE target = ? AND {cond.text})"
            " OR (m.account, COALESCE(m.sender_id, 0)) IN (SELECT account, sender_id"
            f" FROM ingest.tags WHERE target = ? AND {cond.text}))",
            (message, *cond.params, chat, *cond.params, sender, *cond.params),
        )

    # --- names ---

    def _load_senders(self) -> list[_Named]:
        if self._senders is None:
            rows = self.conn.execute(
                "SELECT sender_id, display_name, username FROM ingest.senders"
                " WHERE account IN (SELECT value FROM json_each(?))",
                (_json(self.scope.resolution_accounts),),
            ).fetchall()
            self._senders = [
                _Named(int(r[0]), int(r[0]), str(r[1] or ""), str(r[2] or "")) for r in rows
            ]
        return self._senders

    def load_chats(self) -> list[_Named]:
        """Every chat of the resolution accounts, as name-resolution candidates."""
        if self._chats is None:
            rows = self.conn.execute(
                "SELECT account, chat_id, title, username FROM ingest.chats"
                " WHERE account IN (SELECT value FROM json_each(?))",
                (_json(self.scope.resolution_accounts),),
            ).fetchall()
            by_id: dict[int, _Named] = {}
            for account, chat_id, title, username in rows:
                known = by_id.get(int(chat_id))
                pairs = (known.pairs if known else ()) + ((str(account), int(chat_id)),)
                by_id[int(chat_id)] = _Named(
                    int(chat_id), int(chat_id), str(title or ""), str(username or ""), pairs
                )
            self._chats = list(by_id.values())
        return self._chats

    def resolve_name(
        self, field: str, value: str, span: tuple[int, int], candidates: list[_Named]
    ) -> list[_Named]:
        """The sender or chat ``value`` names; [] when none does.

        Raises:
            AmbiguousName: several different senders or chats answer ``value``.
        """
        bare = value.strip()
        handle = bare[1:] if bare.startswith("@") else bare
        ids = _id_variants(bare, field)
        target = normalise(bare)
        exact = [
            c
            for c in candidates
            if c.ident in ids
            or (c.username and c.username.lower() == handle.lower())
            or (target and normalise(c.name) == target)
        ]
        chosen = exact
        if not exact:
            needle = words(bare)
            chosen = [c for c in candidates if needle and _contains(words(c.name), needle)]
        if len({c.key for c in chosen}) > 1:
            listed = sorted(_describe(c) for c in chosen)
            raise AmbiguousName(
                f"ambiguous name {value!r} for {field}: {len(listed)} candidates",
                hint="use the @username or the numeric id, or narrow the scope",
                metadata={"span": f"{span[0]},{span[1]}", "field": field},
                candidates=listed,
            )
        return chosen

    def _match_names(self, leaf: Leaf, candidates: list[_Named]) -> list[_Named]:
        if isinstance(leaf, Term | Phrase):
            return self.resolve_name(leaf.field, leaf.value, leaf.span, candidates)
        if isinstance(leaf, Prefix):
            start = fold(leaf.value)
            handle = start[1:] if start.startswith("@") else start
            return [
                c
                for c in candidates
                if normalise(c.name).startswith(start)
                or (c.username and c.username.lower().startswith(handle))
            ]
        if isinstance(leaf, Range):
            return [c for c in candidates if _in_range(normalise(c.name), leaf)]
        if isinstance(leaf, Wildcard):
            pattern = compile_wildcard(leaf.pattern, leaf.span, self.budgets, folded=True)
        else:
            assert isinstance(leaf, Regex)
            pattern = compile_regex(leaf.pattern, leaf.span, self.budgets)
        return [
            c
            for c in candidates
            if pattern.matches(normalise(c.name))
            or (c.username and pattern.matches(c.username.lower()))
        ]

    def _from(self, leaf: Leaf) -> Sql:
        chosen = self._match_names(leaf, self._load_senders())
        ids = sorted({c.ident for c in chosen})
        # A bare column, so that the (account, sender_id) index serves it; 0 stands for "no
        # sender" (a NULL sender_id), as COALESCE(sender_id, 0) would have it.
        match = Sql("m.sender_id IN (SELECT value FROM json_each(?))", (_json(ids),))
        if 0 in ids:
            return Sql(f"({match.text} OR m.sender_id IS NULL)", match.params)
        return match

    def _chat(self, leaf: Leaf) -> Sql:
        chosen = self._match_names(leaf, self.load_chats())
        pairs = sorted({p for c in chosen for p in c.pairs})
        return Sql(
            "(m.account, m.chat_id) IN (SELECT value ->> 0, value ->> 1 FROM json_each(?))",
            (_json([list(p) for p in pairs]),),
        )

    def chat_pairs(self, leaf: Leaf) -> list[tuple[str, int]]:
        """The (account, chat_id) pairs a ``chat:`` leaf selects."""
        return sorted({p for c in self._match_names(leaf, self.load_chats()) for p in c.pairs})

    # --- ordered fields ---

    def _interval(self, leaf: Leaf, value: str) -> dates.Interval:
        try:
            return dates.resolve(dates.parse_date(value), self.tz, self.now)
        except ValueError as exc:
            raise invalid("date", str(exc), leaf.span) from exc

    def _date(self, leaf: Leaf) -> Sql:
        column = "m.date"
        if isinstance(leaf, Term):
            parsed = dates.parse_date(leaf.value)
            span = self._interval(leaf, leaf.value)
            if parsed.kind in ("relative", "now"):
                return Sql(f"{column} >= ?", (span.start,))
            if span.point:
                second = math.floor(span.start)
                return Sql(f"({column} >= ? AND {column} < ?)", (second, second + 1))
            return Sql(f"({column} >= ? AND {column} < ?)", (span.start, span.end))
        if isinstance(leaf, Compare):
            return self._compare_date(column, leaf.op, self._interval(leaf, leaf.value))
        assert isinstance(leaf, Range)
        parts = []
        if leaf.lower is not None:
            low = self._interval(leaf, leaf.lower)
            parts.append(self._compare_date(column, ">=" if leaf.include_lower else ">", low))
        if leaf.upper is not None:
            high = self._interval(leaf, leaf.upper)
            parts.append(self._compare_date(column, "<=" if leaf.include_upper else "<", high))
        return _and(parts)

    def _compare_date(self, column: str, op: str, span: dates.Interval) -> Sql:
        if op == ">=":
            return Sql(f"{column} >= ?", (span.start,))
        if op == "<":
            return Sql(f"{column} < ?", (span.start,))
        if span.point:
            return Sql(f"{column} {_OPS[op]} ?", (span.start,))
        if op == ">":
            return Sql(f"{column} >= ?", (span.end,))
        return Sql(f"{column} < ?", (span.end,))

    def _size(self, leaf: Leaf) -> Sql:
        column = "size"
        parts: list[Sql]
        if isinstance(leaf, Term):
            parts = [Sql(f"{column} = ?", (values.parse_size(leaf.value),))]
        elif isinstance(leaf, Compare):
            parts = [Sql(f"{column} {_OPS[leaf.op]} ?", (values.parse_size(leaf.value),))]
        else:
            assert isinstance(leaf, Range)
            parts = []
            if leaf.lower is not None:
                op = ">=" if leaf.include_lower else ">"
                parts.append(Sql(f"{column} {op} ?", (values.parse_size(leaf.lower),)))
            if leaf.upper is not None:
                op = "<=" if leaf.include_upper else "<"
                parts.append(Sql(f"{column} {op} ?", (values.parse_size(leaf.upper),)))
            parts.append(Sql(f"{column} IS NOT NULL"))
        cond = _and(parts)
        return Sql(f"m.mid IN (SELECT mid FROM ingest.media WHERE {cond.text})", cond.params)

    # --- enums ---

    def _kind(self, leaf: Leaf) -> Sql:
        assert isinstance(leaf, EnumValue)
        if leaf.value == "service":
            return Sql("m.kind = ?", ("service",))
        if leaf.value == "unknown":
            return Sql(
                "(m.account, m.chat_id) IN (SELECT account, chat_id FROM ingest.chats"
                " WHERE type NOT IN (SELECT value FROM json_each(?)))",
                (_json(KNOWN_CHAT_TYPES),),
            )
        return Sql(
            "(m.account, m.chat_id) IN (SELECT account, chat_id FROM ingest.chats"
            " WHERE type IN (SELECT value FROM json_each(?)))",
            (_json(KIND_CHAT_TYPES[leaf.value]),),
        )

    def _has(self, leaf: Leaf) -> Sql:
        assert isinstance(leaf, EnumValue)
        if leaf.value == "link":
            return Sql("m.has_link <> 0")
        if leaf.value == "attachment":
            return Sql("m.mid IN (SELECT mid FROM ingest.media)")
        if leaf.value == "image":
            return Sql(
                "m.mid IN (SELECT mid FROM ingest.media"
                " WHERE kind = ? OR (kind = ? AND COALESCE(mime, ?) GLOB ?))",
                ("photo", "document", "", "image/*"),
            )
        return Sql(
            "m.mid IN (SELECT mid FROM ingest.media"
            " WHERE kind IN (SELECT value FROM json_each(?)))",
            (_json(HAS_MEDIA_KINDS[leaf.value]),),
        )

    def _topic(self, leaf: Leaf) -> Sql:
        assert isinstance(leaf, Term)
        return Sql("COALESCE(m.topic_id, ?) = ?", (GENERAL_TOPIC, int(leaf.value)))

    def _in(self, leaf: Leaf) -> Sql:
        assert isinstance(leaf, EnumValue)
        scope = values.parse_in(leaf.value)
        if scope.provider is None:
            return TRUE
        if scope.account is None:
            return Sql(
                "m.account IN (SELECT account FROM ingest.accounts WHERE provider = ?)",
                (scope.provider,),
            )
        return Sql("m.account = ?", (scope.account,))

    # --- post-filters ---

    def evaluate_post_filters(self, root: Node) -> None:
        """Compute the id set of every body-regex and preset leaf under ``root``, in order.

        Raises:
            QueryLimit: candidates, scanned bytes or time ran out.
        """
        for leaf, path in _paths(root):
            if not _is_post_filter(leaf):
                continue
            if _irrelevant(path):
                self.leaf_sets[id(leaf)] = []
                continue
            context = [self.scope_sql()]
            for group, child in path:
                for sibling in group.must:
                    if sibling is not child:
                        self._add_context(context, sibling, negate=False)
                for sibling in group.must_not:
                    if sibling is not child:
                        self._add_context(context, sibling, negate=True)
            self.leaf_sets[id(leaf)] = self._scan(leaf, _and(context))

    def _add_context(self, context: list[Sql], node: Node, *, negate: bool) -> None:
        try:
            predicate = self.predicate(node)
        except _Pending:
            self._pred_cache.pop(id(node), None)
            return
        if predicate is not None:
            context.append(_not(predicate) if negate else predicate)

    def _scan(self, leaf: Leaf, where: Sql) -> list[int]:
        count = int(
            self.conn.execute(
                f"SELECT count(*) FROM ingest.messages AS m WHERE {where.text}", where.params
            ).fetchone()[0]
        )
        if self.candidates_used + count > self.budgets.candidates:
            raise exceeded(
                "candidates",
                self.budgets.candidates,
                f"{self.candidates_used + count} messages would need a full-text check",
                leaf.span,
            )
        self.candidates_used += count
        check = self._checker(leaf)
        found: list[int] = []
        last = 0
        while True:
            rows = self.conn.execute(
                "SELECT m.mid, m.text, (SELECT kind FROM ingest.media WHERE mid = m.mid)"
                f" FROM ingest.messages AS m WHERE {where.text} AND m.mid > ?"
                " ORDER BY m.mid LIMIT ?",
                (*where.params, last, POST_FILTER_BATCH),
            ).fetchall()
            if not rows:
                return found
            for mid, text, media_kind in rows:
                body = str(text)
                self.bytes_scanned += len(body.encode("utf-8", "surrogatepass"))
                if self.bytes_scanned > self.budgets.body_bytes_scanned:
                    raise exceeded(
                        "body_bytes_scanned",
                        self.budgets.body_bytes_scanned,
                        "the candidates hold too much text to check",
                        leaf.span,
                    )
                if check(body, media_kind):
                    found.append(int(mid))
            last = int(rows[-1][0])
            self.deadline.check("checking candidates")

    def _checker(self, leaf: Leaf) -> Callable[[str, str | None], bool]:
        if isinstance(leaf, Regex):
            pattern = compile_regex(leaf.pattern, leaf.span, self.budgets)
            return lambda text, _kind: pattern.matches(text)
        assert isinstance(leaf, EnumValue)
        name = leaf.value
        return lambda text, kind: presets.matches(name, text, kind)

    # --- ranking ---

    def _positive_text(self, root: Node) -> list[Leaf]:
        out: list[Leaf] = []
        stack: list[Node] = [root]
        while stack:
            node = stack.pop()
            if isinstance(node, Bool):
                stack.extend(reversed(node.must + node.should))
            elif _is_text(node):
                out.append(node)
        return out

    def rank_query(self, root: Node) -> str | None:
        """An FTS5 query over every positive ``text`` leaf, for bm25; None if there is none.

        The leaves are OR-ed, so that every message the query matches is scored. When every
        one of them is required (``_all_required``) they are AND-ed instead: bm25 then walks
        only the messages holding all of them, and scores each exactly as before, since bm25
        sums over the same phrases whichever operator joins them.
        """
        leaves = self._positive_text(root)
        parts = [f"( {fts} )" for leaf in leaves if (fts := self.fts(leaf))]
        if not parts:
            return None
        joiner = " AND " if self._ranks_all(root, leaves) else " OR "
        return joiner.join(parts)

    def _ranks_all(self, root: Node, leaves: list[Leaf]) -> bool:
        """Whether ``rank_query`` ANDs ``leaves`` (every positive text leaf of ``root``)."""
        return bool(leaves) and all(self.fts(leaf) for leaf in leaves) and _all_required(root)

    def highlight_terms(self, root: Node) -> set[str]:
        """The indexed words the positive ``text`` leaves of ``root`` match (for snippets)."""
        out: set[str] = set()
        for leaf in self._positive_text(root):
            self.fts(leaf)
            out.update(self._terms.get(id(leaf), ()))
        return out


def _id_variants(value: str, field: str) -> set[int]:
    text = value.strip()
    negative = text.startswith("-")
    digits = text[1:] if negative else text
    if not digits.isascii() or not digits.isdigit() or len(digits) > 19:
        return set()
    number = -int(digits) if negative else int(digits)
    if field != "chat" or negative:
        return {number}
    return {number, -number, -(MARKED_CHANNEL_BASE + number)}


def _in_range(value: str, leaf: Range) -> bool:
    if leaf.lower is not None:
        low = normalise(leaf.lower)
        if value < low or (value == low and not leaf.include_lower):
            return False
    if leaf.upper is not None:
        high = normalise(leaf.upper)
        if value > high or (value == high and not leaf.include_upper):
            return False
    return True


def _contains(haystack: list[str], needle: list[str]) -> bool:
    size = len(needle)
    return any(haystack[i : i + size] == needle for i in range(len(haystack) - size + 1))


def _describe(named: _Named) -> str:
    handle = f" @{named.username}" if named.username else ""
    return f"{named.name or '(no name)'}{handle} (id {named.ident})"


def _paths(root: Node) -> list[tuple[Leaf, list[tuple[Bool, Node]]]]:
    out: list[tuple[Leaf, list[tuple[Bool, Node]]]] = []
    stack: list[tuple[Node, list[tuple[Bool, Node]]]] = [(root, [])]
    while stack:
        node, path = stack.pop()
        if isinstance(node, Bool):
            for child in reversed(node.must + node.should + node.must_not):
                stack.append((child, [*path, (node, child)]))
        else:
            out.append((node, path))
    return out


def _irrelevant(path: list[tuple[Bool, Node]]) -> bool:
    """Whether a leaf's value cannot change the result (optional beside a required clause)."""
    for group, child in path:
        must = [c for c in group.must if not is_void(c)]
        should = [c for c in group.should if not is_void(c)]
        if not must and not should:
            return True
        if must and any(child is c for c in group.should):
            return True
    return False
