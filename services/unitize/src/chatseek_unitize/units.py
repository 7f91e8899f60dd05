"""The units consumer: keeps ``units`` in step with the ingest feed, and re-cuts by recipe.

Invariants:
* One batch of ingest events is one transaction with the ``ingest`` cursor: a crash repeats or
  loses nothing, and re-applying events writes nothing.
* A changed message re-cuts only what it reaches: its topic's windows from the last window that
  starts before it (``recut_anchor``) until they rejoin the stored ones, the reply threads whose
  roots reach it before or after the change, and the channel posts it is or comments on.
* A chat seen for the first time is cut whole when ingest holds at most ``WHOLE_CUT_MAX`` of its
  messages; a bigger one is cut as its events arrive, batch by batch, so no batch holds a whole
  chat in memory (incremental cuts equal a whole cut: tests pin it). A chat on an older recipe
  is cut whole in its own transaction while its old units stay searchable (a big one page by
  page, ``paged``). A deleted message
  also leaves the conversation chunks of the chat's current build (``builds.prune_chunks``).
  Ids, no-op skips and events follow ``store.UnitWriter``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from chatseek_core import db, feed
from chatseek_core.db import Connection
from chatseek_core.render import ALBUM_MAX
from chatseek_unitize import loader
from chatseek_unitize.builds import drop_chat_builds, prune_chunks
from chatseek_unitize.cutting import (
    CHANNEL_CHAT_TYPES,
    Lines,
    chrono_key,
    cut_chat,
    cut_posts,
    cut_threads,
    is_unit_member,
    recut_anchor,
    recut_from,
    thread_graph,
    thread_roots_of,
)
from chatseek_unitize.model import RECIPE_VERSION, CutConfig, Msg, Unit, content_hash
from chatseek_unitize.paged import cut_paged
from chatseek_unitize.store import (
    StoredUnit,
    UnitWriter,
    held_units,
    stored_units,
    thread_units,
)

__all__ = [
    "DEFAULT_BATCH",
    "FEED_NAME",
    "MESSAGE_EVENT",
    "ApplyStats",
    "RecutReport",
    "apply_ingest_feed",
    "ingest_lag",
    "recut_chat",
    "recut_chats",
    "recut_next_pending",
    "recut_pending",
    "WHOLE_CUT_MAX",
]

log = logging.getLogger(__name__)

FEED_NAME = "ingest"
MESSAGE_EVENT = "message"
DEFAULT_BATCH = 2000
# The most stored messages a chat may have to be cut whole in one go. A whole cut holds every
# message and unit of the chat at once, about 2.6 KB a message (180 MiB for a 70k-message chat,
# 950 MiB for 650k); this bounds it near 50 MiB. A bigger first-seen chat is cut as its events
# arrive, batch by batch, which is what a chat imported while unitize runs costs anyway: on the
# bench's 1M archive 3-5% more CPU than whole cuts up to 100,000 messages, on its 100k archive
# about 15%, for a peak of 81 against 272 MiB (bench/PROFILES.md). A bigger chat on an older
# recipe is re-cut page by page (``paged``).
WHOLE_CUT_MAX = 20_000
WINDOW_PAGE = 256
"""Messages read per page while re-cutting windows; doubled when a page closes no window."""

Key = tuple[int, int]
Progress = Callable[[tuple[int, int, str]], None]


@dataclass
class ApplyStats:
    """What one ``apply_ingest_feed`` call did."""

    events: int = 0
    chats: int = 0
    upserted: int = 0
    deleted: int = 0


@dataclass
class RecutReport:
    """What a ``recut_chats`` run did."""

    chats: int = 0
    upserted: int = 0
    deleted: int = 0
    pending_left: int = 0
    done: list[tuple[str, int]] = field(default_factory=list)


# --- feed ---


def apply_ingest_feed(
    conn: Connection, *, batch: int = DEFAULT_BATCH, cfg: CutConfig | None = None
) -> int:
    """Apply up to ``batch`` ingest feed events after the ``ingest`` cursor.

    Args:
        conn: ``unitize.db`` with ``ingest.db`` attached read-only as ``ingest``.
        batch: The most events to consume in this transaction.
        cfg: Cutting limits.

    Returns:
        The number of events consumed (0 when the cursor is at the feed's head).
    """
    return _apply(conn, batch, cfg or CutConfig()).events


def _apply(conn: Connection, batch: int, cfg: CutConfig) -> ApplyStats:
    stats = ApplyStats()
    with db.transaction(conn):
        after = feed.cursor(conn, FEED_NAME)
        events = feed.read_after(conn, after, batch, schema="ingest")
        if not events:
            return stats
        by_chat: dict[tuple[str, int], list[tuple[int, int]]] = {}
        for event in events:
            if event.kind == MESSAGE_EVENT:
                by_chat.setdefault((event.account, event.chat_id), []).append(
                    (event.seq, event.entity)
                )
        writers: dict[str, UnitWriter] = {}
        for (account, chat_id), seq_ids in by_chat.items():
            cut_through = _cut_through(conn, account, chat_id)
            msg_ids = {msg_id for seq, msg_id in seq_ids if seq > cut_through}
            if not msg_ids:
                continue
            writer = writers.setdefault(account, UnitWriter(conn, account))
            _apply_chat(conn, writer, account, chat_id, msg_ids, cfg)
        for writer in writers.values():
            stats.upserted += writer.upserted
            stats.deleted += writer.deleted
            writer.flush()
        feed.set_cursor(conn, FEED_NAME, events[-1].seq)
        stats.events = len(events)
        stats.chats = len(by_chat)
    log.debug(
        "applied %d ingest events over %d chats: %d units written, %d deleted",
        stats.events,
        stats.chats,
        stats.upserted,
        stats.deleted,
    )
    return stats


def ingest_lag(conn: Connection) -> int:
    """Ingest feed events this consumer has not applied yet (0 while ingest.db is not ready)."""
    attached = {row[1] for row in conn.execute("PRAGMA database_list")}
    if "ingest" not in attached:
        return 0
    migrated = conn.execute(
        "SELECT 1 FROM ingest.sqlite_master WHERE type = 'table' AND name = '_feed'"
    ).fetchone()
    if migrated is None:
        return 0
    return max(0, feed.head(conn, "ingest") - feed.cursor(conn, FEED_NAME))


def _cut_through(conn: Connection, account: str, chat_id: int) -> int:
    """The ingest feed head the chat's last whole cut read (its events up to it are reflected)."""
    row = conn.execute(
        "SELECT feed_seq FROM chat_recipes WHERE account = ? AND chat_id = ?", (account, chat_id)
    ).fetchone()
    return 0 if row is None else int(row[0])


def _recipe_of(conn: Connection, account: str, chat_id: int) -> int | None:
    row = conn.execute(
        "SELECT recipe FROM chat_recipes WHERE account = ? AND chat_id = ?", (account, chat_id)
    ).fetchone()
    return None if row is None else int(row[0])


def _set_recipe(conn: Connection, account: str, chat_id: int, *, whole: bool) -> None:
    """Record the current recipe; a whole cut also records the ingest head it read."""
    if whole:
        conn.execute(
            "INSERT INTO chat_recipes (account, chat_id, recipe, feed_seq) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (account, chat_id) DO UPDATE SET recipe = excluded.recipe,"
            " feed_seq = excluded.feed_seq, cut_at = unixepoch()",
            (account, chat_id, RECIPE_VERSION, feed.head(conn, "ingest")),
        )
        return
    conn.execute(
        "INSERT INTO chat_recipes (account, chat_id, recipe) VALUES (?, ?, ?)"
        " ON CONFLICT (account, chat_id) DO NOTHING",
        (account, chat_id, RECIPE_VERSION),
    )


def _apply_chat(
    conn: Connection,
    writer: UnitWriter,
    account: str,
    chat_id: int,
    changed: set[int],
    cfg: CutConfig,
) -> None:
    """Re-cut whatever the changed messages of one chat reach (see the module docstring)."""
    info = loader.chat_info(conn, account, chat_id)
    present = loader.load_ids(conn, account, chat_id, changed)
    held = held_units(conn, account, chat_id, changed)
    is_channel = info is not None and info.type in CHANNEL_CHAT_TYPES
    posts: dict[int, set[int]] = {}
    for unit in held:
        if unit.kind == "post":
            posts.setdefault(unit.chat_id, set()).add(unit.msg_ids[0])
    for msg in present.values():
        if msg.comment_of is not None:
            posts.setdefault(msg.comment_of[0], set()).add(msg.comment_of[1])
    whole = (
        info is not None
        and _recipe_of(conn, account, chat_id) is None
        and loader.stored_count(conn, account, chat_id, WHOLE_CUT_MAX + 1) <= WHOLE_CUT_MAX
    )
    if whole and info is not None:
        _cut_whole(conn, writer, info, cfg)
        posts.pop(chat_id, None)
    elif is_channel:
        posts.setdefault(chat_id, set()).update(changed)
    else:
        # One set of rendered lines for both re-cuts: most thread members sit in a window too.
        lines = Lines()
        spans = _window_changes(present, held)
        _recut_windows(conn, writer, account, chat_id, spans, present, cfg, lines)
        _recut_threads(conn, writer, account, chat_id, changed, present, held, cfg, lines)
    if info is not None:
        _set_recipe(conn, account, chat_id, whole=whole)
        prune_chunks(conn, writer, account, chat_id, changed - set(present))
    else:
        conn.execute(
            "DELETE FROM chat_recipes WHERE account = ? AND chat_id = ?", (account, chat_id)
        )
        drop_chat_builds(conn, writer, account, chat_id)
    comments = {m.msg_id for m in present.values() if m.comment_of is not None}
    for channel_id, post_ids in posts.items():
        group_ids = comments if channel_id != chat_id else set()
        _recut_posts(conn, writer, account, channel_id, post_ids, group_ids, cfg)


# --- windows ---


def _window_changes(
    present: dict[int, Msg], held: Sequence[StoredUnit]
) -> dict[int | None, tuple[Key, Key]]:
    """Per topic: the earliest and the latest ``chrono_key`` a change may touch.

    A message that is gone (or moved) is placed at the start of the window that held it, which
    makes ``recut_anchor`` restart one window earlier: safe, and never more than one window.
    """
    spans: dict[int | None, tuple[Key, Key]] = {}

    def widen(topic: int | None, low: Key, high: Key) -> None:
        old = spans.get(topic)
        spans[topic] = (low, high) if old is None else (min(old[0], low), max(old[1], high))

    for msg in present.values():
        key = chrono_key(msg)
        widen(msg.topic_id, key, key)
    for unit in held:
        if unit.kind == "window":
            topic = unit.topic_key or None
            widen(topic, (unit.first_date, unit.msg_ids[0]), (unit.last_date, unit.msg_ids[-1]))
    return spans


def _start(unit: Unit | StoredUnit) -> Key:
    return (unit.first_date, unit.msg_ids[0])


def _anchor_unit(row: Sequence[Any]) -> Unit:
    first_date, first_msg = int(row[0]), int(row[1])
    return Unit(
        kind="window",
        key=f"w:{first_msg}",
        topic_id=None,
        msg_ids=(first_msg,),
        first_date=first_date,
        last_date=first_date,
        senders=(),
        reactions=0,
        text="",
        content_hash=content_hash(RECIPE_VERSION, ""),
    )


def _recut_windows(
    conn: Connection,
    writer: UnitWriter,
    account: str,
    chat_id: int,
    spans: dict[int | None, tuple[Key, Key]],
    present: Mapping[int, Msg],
    cfg: CutConfig,
    lines: Lines,
) -> None:
    for topic, (earliest, latest) in spans.items():
        tkey = topic or 0
        before = conn.execute(
            "SELECT start_date, first_msg_id FROM units WHERE account = ? AND chat_id = ?"
            " AND topic_key = ? AND kind = 'window'"
            " AND start_date <= ? AND (start_date < ? OR first_msg_id < ?)"
            " ORDER BY start_date DESC, first_msg_id DESC LIMIT 1",
            (account, chat_id, tkey, earliest[0], earliest[0], earliest[1]),
        ).fetchone()
        anchor = recut_anchor([_anchor_unit(before)] if before else [], earliest)
        new, stop = _cut_until_unchanged(
            conn, account, chat_id, topic, anchor, latest, present, cfg, lines
        )
        where, params = "topic_key = ? AND kind = 'window'", [tkey]
        if anchor is not None:
            where += " AND start_date >= ? AND (start_date > ? OR first_msg_id >= ?)"
            params += [anchor[0], anchor[0], anchor[1]]
        if stop is not None:
            where += " AND start_date <= ? AND (start_date < ? OR first_msg_id < ?)"
            params += [stop[0], stop[0], stop[1]]
        old = stored_units(conn, account, chat_id, where, params)
        writer.sync(chat_id, None, old, new)


def _cut_until_unchanged(
    conn: Connection,
    account: str,
    chat_id: int,
    topic: int | None,
    anchor: Key | None,
    latest: Key,
    pool: Mapping[int, Msg],
    cfg: CutConfig,
    lines: Lines,
) -> tuple[list[Unit], Key | None]:
    """Re-cut one topic's windows from ``anchor`` until they rejoin the stored ones.

    Pages are read through ``pool`` (the batch's changed messages, already read).

    Returns:
        The new windows, and the start of the first stored window from which on nothing
        changes (None when the re-cut ran to the topic's end).
    """
    new: list[Unit] = []
    cursor, page = anchor, WINDOW_PAGE
    while True:
        msgs = loader.load_topic_page(conn, account, chat_id, topic, cursor, page, pool)
        full = len(msgs) == page
        cut = recut_from(msgs, 0, cfg, lines=lines)
        if full and len(cut) < 2:
            page *= 2
            continue
        final = cut[:-1] if full else cut
        later = [u for u in final if _start(u) > latest]
        if later:
            marks = ",".join("?" * len(later))
            stored = dict(
                conn.execute(
                    "SELECT key, content_hash FROM units WHERE account = ? AND chat_id = ?"
                    f" AND topic_key = ? AND kind = 'window' AND key IN ({marks})",
                    (account, chat_id, topic or 0, *(u.key for u in later)),
                ).fetchall()
            )
            for index, unit in enumerate(final):
                if _start(unit) > latest and stored.get(unit.key) == unit.content_hash:
                    new.extend(final[:index])
                    return new, _start(unit)
            # Past the changes with nothing stored from here on: the rest of the topic has not
            # been cut yet (its messages' events are still ahead in the feed, and each batch
            # cuts from the last stored window, as an append does), so cutting it now would
            # hold every later window of the chat in memory at once.
            first = later[0]
            if not _stored_from(conn, account, chat_id, topic, _start(first)):
                index = final.index(first)
                new.extend(final[:index])
                return new, _start(first)
        new.extend(final)
        if not full:
            return new, None
        cursor = _start(cut[-1])


def _stored_from(
    conn: Connection, account: str, chat_id: int, topic: int | None, start: Key
) -> bool:
    """Whether any window of the topic is stored starting at ``start`` or later.

    The bare ``start_date >= ?`` bounds the index range: with the bounds only inside an OR, the
    planner scanned every window of the topic (6 ms a call on a 1M-message chat, against µs).
    """
    row = conn.execute(
        "SELECT 1 FROM units WHERE account = ? AND chat_id = ? AND topic_key = ?"
        " AND kind = 'window' AND start_date >= ? AND (start_date > ? OR first_msg_id >= ?)"
        " LIMIT 1",
        (account, chat_id, topic or 0, start[0], start[0], start[1]),
    ).fetchone()
    return row is not None


# --- threads ---


def _close_up(
    conn: Connection, account: str, chat_id: int, starts: Iterable[int], pool: dict[int, Msg]
) -> None:
    """Load into ``pool`` everything above ``starts``: reply targets and album photos, to the top.

    ``pool`` holds loaded messages by id; ids that ingest no longer has stay out of it.
    """
    tried: set[int] = set(pool)
    albums: set[int] = set()
    pending = [pool[s] for s in starts if s in pool]
    while pending:
        wanted = {m.reply_to for m in pending if m.reply_to is not None} - tried
        groups = {m.grouped_id for m in pending if m.grouped_id is not None} - albums
        tried |= wanted
        albums |= groups
        found = loader.load_ids(conn, account, chat_id, wanted) if wanted else {}
        if groups:
            found.update(loader.album_members(conn, account, chat_id, groups))
        pending = [m for i, m in found.items() if i not in pool]
        for m in pending:
            pool[m.msg_id] = m
        tried |= set(found)


def _close_down(
    conn: Connection, account: str, chat_id: int, roots: Iterable[int], pool: dict[int, Msg]
) -> set[int]:
    """Load into ``pool`` everything below ``roots``: replies and album photos, to the leaves.

    Returns:
        The ids of ``roots`` and of everything below them.
    """
    below = {r for r in roots if r in pool}
    frontier = set(below)
    while frontier:
        found = {k.msg_id: k for k in loader.children_of(conn, account, chat_id, frontier, pool)}
        groups = {
            m.grouped_id
            for m in (*(pool[i] for i in frontier), *found.values())
            if m.grouped_id is not None
        }
        if groups:
            found.update(loader.album_members(conn, account, chat_id, groups))
        for i, m in found.items():
            pool.setdefault(i, m)
        frontier = set(found) - below
        below |= frontier
    return below


def _thread_roots(
    conn: Connection, account: str, chat_id: int, starts: set[int], pool: dict[int, Msg]
) -> set[int]:
    """The roots of every thread that ``starts`` are in, with each such thread in ``pool``.

    Roots are album heads (see ``thread_graph``). A thread found below a root is walked up as
    well, since one of its albums may reply elsewhere; the loop ends when no new root appears.
    """
    roots: set[int] = set()
    while True:
        _close_up(conn, account, chat_id, starts, pool)
        heads, edges = thread_graph(pool.values())
        found = set(thread_roots_of([heads.get(s, s) for s in starts if s in pool], edges))
        fresh = found - roots
        if not fresh:
            return roots
        roots |= fresh
        starts = _close_down(conn, account, chat_id, fresh, pool)


def _recut_threads(
    conn: Connection,
    writer: UnitWriter,
    account: str,
    chat_id: int,
    changed: set[int],
    present: dict[int, Msg],
    held: Sequence[StoredUnit],
    cfg: CutConfig,
    lines: Lines,
) -> None:
    """Re-cut the threads the changed messages are, were or now become part of.

    Candidates are the changed messages, the roots of the thread units that held them (and,
    for an album root whose first photo went, its other photos), and the replies to any of
    them; every thread any candidate is in is cut again from its root.
    """
    pool: dict[int, Msg] = dict(present)
    held_roots: set[int] = set()
    held_ids: set[int] = set()
    threaded: set[int] = set()  # every message a stored thread unit holds
    for unit in held:
        if unit.kind == "thread":
            root = int(unit.key.split(":")[1])
            held_roots.add(root)
            held_ids.add(root)
            held_ids.update(i for i in unit.msg_ids[1:] if root < i <= root + ALBUM_MAX)
            threaded.update(unit.msg_ids)
    # A message that is no unit member (a forum topic's opening service message, which every
    # message of the topic replies to) and was in no thread is in no thread, before the change
    # or after, and nobody's parent in one: neither it nor its replies are walked, or a
    # forum's first batch would load every topic whole.
    inert = {i for i, m in present.items() if not is_unit_member(m)} - threaded
    candidates = (set(present) - inert) | held_roots
    pool.update(loader.load_ids(conn, account, chat_id, held_ids - set(pool)))
    candidates |= held_ids & set(pool)
    groups = {m.grouped_id for m in present.values() if m.grouped_id is not None}
    photos = loader.album_members(conn, account, chat_id, groups) if groups else {}
    for msg_id, photo in photos.items():
        pool.setdefault(msg_id, photo)
    replying = (changed - inert) | set(photos)
    for child in loader.children_of(conn, account, chat_id, replying, pool):
        pool.setdefault(child.msg_id, child)
        candidates.add(child.msg_id)
    roots = _thread_roots(conn, account, chat_id, {c for c in candidates if c in pool}, pool)
    new = cut_threads(pool.values(), cfg, roots=roots, lines=lines) if roots else []
    old = thread_units(conn, account, chat_id, candidates | roots)
    writer.sync(chat_id, None, old, new)


# --- posts ---


def _recut_posts(
    conn: Connection,
    writer: UnitWriter,
    account: str,
    channel_id: int,
    post_ids: set[int],
    group_changed: set[int],
    cfg: CutConfig,
) -> None:
    """Re-cut the post units of ``post_ids`` with their current comments.

    The posts of an album are one unit, so a change to any of them re-cuts the whole album:
    ``post_ids`` grows by every stored member of the albums its posts (or the posts of their
    old units, for an album whose first post is gone) belong to.
    """
    info = loader.chat_info(conn, account, channel_id)
    linked = info.linked_chat_id if info is not None else None
    old = _post_units(conn, account, channel_id, post_ids)
    if info is not None:
        post_ids = post_ids | _album_posts(conn, account, channel_id, post_ids, old)
        old = _post_units(conn, account, channel_id, post_ids)
    posts = loader.load_ids(conn, account, channel_id, post_ids) if info is not None else {}
    if info is not None and info.type not in CHANNEL_CHAT_TYPES:
        posts = {}
    by_post: dict[int, list[Msg]] = {}
    if linked is not None and posts:
        known = {m for u in old for m in u.msg_ids[1:]} | group_changed
        fresh = set(posts) - {u.msg_ids[0] for u in old}
        comments = list(loader.load_ids(conn, account, linked, known).values())
        if fresh:
            comments.extend(loader.comments_of(conn, account, linked, channel_id, fresh))
        for msg in comments:
            if msg.comment_of is not None and msg.comment_of[0] == channel_id:
                if msg.comment_of[1] in posts:
                    by_post.setdefault(msg.comment_of[1], []).append(msg)
        for post, seq in by_post.items():
            unique = {m.msg_id: m for m in seq}
            by_post[post] = list(unique.values())
    new = cut_posts(posts.values(), by_post, cfg)
    writer.sync(channel_id, linked, old, new)


def _post_units(
    conn: Connection, account: str, channel_id: int, post_ids: set[int]
) -> list[StoredUnit]:
    old: list[StoredUnit] = []
    for post in sorted(post_ids):
        old.extend(
            stored_units(
                conn,
                account,
                channel_id,
                # The range bounds the index search (a bare OR of the two keys made SQLite read
                # every post unit of the channel for each post); the OR drops p:{post}N.
                "kind = 'post' AND key >= ? AND key < ? AND (key = ? OR key >= ?)",
                (f"p:{post}", f"p:{post};", f"p:{post}", f"p:{post}:"),
            )
        )
    return old


def _album_posts(
    conn: Connection,
    account: str,
    channel_id: int,
    post_ids: set[int],
    old: Sequence[StoredUnit],
) -> set[int]:
    """Every stored post of the albums that ``post_ids`` or their old units' posts are in.

    An album's posts carry consecutive ids from its first one, so the old unit's ids right
    after its first are the candidates; a comment id among them only adds an album in full.
    """
    seed = set(post_ids)
    for unit in old:
        first = unit.msg_ids[0]
        seed.update(i for i in unit.msg_ids[1:] if first < i <= first + ALBUM_MAX)
    loaded = loader.load_ids(conn, account, channel_id, seed)
    groups = {m.grouped_id for m in loaded.values() if m.grouped_id is not None}
    if not groups:
        return set()
    return set(loader.album_members(conn, account, channel_id, groups))


# --- whole chats ---


def _cut_whole(conn: Connection, writer: UnitWriter, info: loader.ChatInfo, cfg: CutConfig) -> None:
    """Cut one chat from scratch and swap its stored units (not its conversation chunks)."""
    msgs = loader.load_chat(conn, info.account, info.chat_id)
    comments: list[Msg] = []
    if info.type in CHANNEL_CHAT_TYPES and info.linked_chat_id is not None:
        comments = [
            m
            for m in loader.comments_of(conn, info.account, info.linked_chat_id, info.chat_id)
            if m.comment_of is not None and m.comment_of[0] == info.chat_id
        ]
    new = cut_chat(msgs, chat_type=info.type, cfg=cfg, comments=comments)
    old = stored_units(conn, info.account, info.chat_id, "kind != 'conversation'")
    writer.sync(info.chat_id, info.linked_chat_id, old, new)


def recut_chat(
    conn: Connection, account: str, chat_id: int, cfg: CutConfig | None = None
) -> tuple[int, int]:
    """Re-cut one chat whole in one transaction and record the current recipe.

    A chat of more than ``WHOLE_CUT_MAX`` messages is cut page by page (``paged.cut_paged``)
    to the same units, without holding it. A chat ingest no longer has loses its units and
    its recipe row.

    Returns:
        ``(units written, units deleted)``.
    """
    with db.transaction(conn):
        writer = UnitWriter(conn, account)
        info = loader.chat_info(conn, account, chat_id)
        if info is None:
            writer.delete(stored_units(conn, account, chat_id, "kind != 'conversation'"))
            conn.execute(
                "DELETE FROM chat_recipes WHERE account = ? AND chat_id = ?", (account, chat_id)
            )
        elif loader.stored_count(conn, account, chat_id, WHOLE_CUT_MAX + 1) > WHOLE_CUT_MAX:
            cut_paged(conn, writer, info, cfg or CutConfig())
            _set_recipe(conn, account, chat_id, whole=True)
        else:
            _cut_whole(conn, writer, info, cfg or CutConfig())
            _set_recipe(conn, account, chat_id, whole=True)
        writer.flush()
    log.info(
        "re-cut chat %s/%d: %d units written, %d deleted",
        account,
        chat_id,
        writer.upserted,
        writer.deleted,
    )
    return writer.upserted, writer.deleted


def recut_pending(conn: Connection) -> list[tuple[str, int]]:
    """Chats whose units were cut by an older recipe, oldest first."""
    rows = conn.execute(
        "SELECT account, chat_id FROM chat_recipes WHERE recipe < ? ORDER BY cut_at, chat_id",
        (RECIPE_VERSION,),
    )
    return [(str(r[0]), int(r[1])) for r in rows]


def recut_next_pending(conn: Connection, cfg: CutConfig | None = None) -> int:
    """Re-cut one pending chat, if any; returns 1 when it did, else 0."""
    pending = recut_pending(conn)
    if not pending:
        return 0
    account, chat_id = pending[0]
    recut_chat(conn, account, chat_id, cfg)
    return 1


def recut_chats(
    conn: Connection,
    *,
    account: str = "",
    chat_ids: Sequence[int] = (),
    cfg: CutConfig | None = None,
    on_progress: Progress | None = None,
) -> RecutReport:
    """Re-cut the given chats of ``account`` (or every pending chat), each in its own transaction.

    Args:
        account: The account of ``chat_ids``; with no chat ids, limits the pending chats to
            this account when given.
        chat_ids: Chats to re-cut whatever their recipe; empty for every pending chat.
        on_progress: Receives ``(done, total, note)`` after each chat.
    """
    if chat_ids:
        targets = [(account, c) for c in chat_ids]
    else:
        targets = [t for t in recut_pending(conn) if not account or t[0] == account]
    report = RecutReport()
    for done, (acct, chat_id) in enumerate(targets, start=1):
        upserted, deleted = recut_chat(conn, acct, chat_id, cfg)
        report.chats += 1
        report.upserted += upserted
        report.deleted += deleted
        report.done.append((acct, chat_id))
        if on_progress is not None:
            on_progress((done, len(targets), f"chat {chat_id}"))
    report.pending_left = len(recut_pending(conn))
    return report
