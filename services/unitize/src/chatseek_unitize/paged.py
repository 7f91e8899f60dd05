"""A whole re-cut of a big chat without holding it: windows, threads and posts page by page.

``units.recut_chat`` cuts a chat of at most ``units.WHOLE_CUT_MAX`` messages from the list of
all its messages (``cutting.cut_chat``), which for a 650k-message chat held 950 MiB.
``cut_paged`` cuts a bigger chat to the same units (a test pins it) holding about ``PAGE``
messages and their units at a time, and four integers a message for the reply graph:

* windows: each topic is walked in ``chrono_key`` order, ``PAGE`` messages at a time; the
  window still open at a page's end is cut again from the next page, as the feed's appends do;
* threads: one read of the chat gives each unit member's album head and counted reply edge,
  by ``cutting.thread_graph``'s rules, hence the root of every thread; the threads are then
  loaded and cut, whole threads of about ``PAGE`` messages at a time;
* posts (a channel): its posts in pages that never split an album, each with its comments.

Each page's units are synced against the stored units of the same identities, inside the
caller's transaction, and their events appended; then every other stored unit of the chat
(conversation chunks aside) is deleted.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

import numpy as np

from chatseek_core.db import Connection
from chatseek_core.render import same_album
from chatseek_unitize import loader
from chatseek_unitize.cutting import (
    CHANNEL_CHAT_TYPES,
    cut_posts,
    cut_threads,
    is_unit_member,
    recut_from,
)
from chatseek_unitize.model import CutConfig, Msg, Unit
from chatseek_unitize.store import UnitWriter, stored_units, topic_key, units_by_ident

__all__ = ["PAGE", "cut_paged"]

PAGE = 4096
"""Messages cut per page; a page grows past it only to close a window, a thread or an album."""
_NONE = -(2**63)
_IN_CHUNK = 500


def cut_paged(conn: Connection, writer: UnitWriter, info: loader.ChatInfo, cfg: CutConfig) -> None:
    """Cut one chat from scratch, page by page, and swap its stored units (not its chunks).

    The result is ``units._cut_whole``'s: the same stored units, ids kept for every identity
    that stays, the same events for what changed.
    """
    pages = _Pages(conn, writer, info)
    if info.type in CHANNEL_CHAT_TYPES:
        _posts(pages, cfg)
    else:
        _windows(pages, cfg)
        _threads(pages, cfg)
    pages.sweep()


class _Pages:
    """Syncs the new units a page at a time and keeps the id of every unit they hold."""

    def __init__(self, conn: Connection, writer: UnitWriter, info: loader.ChatInfo) -> None:
        self.conn = conn
        self.writer = writer
        self.info = info
        self.kept = array("q")

    def sync(self, new: Sequence[Unit]) -> None:
        """Make the stored units of ``new``'s identities become ``new``."""
        if not new:
            return
        info = self.info
        old = units_by_ident(
            self.conn,
            info.account,
            info.chat_id,
            ((topic_key(u.topic_id), u.kind, u.key) for u in new),
        )
        ids = self.writer.sync(info.chat_id, info.linked_chat_id, old, new)
        self.kept.extend(ids.values())
        self.writer.flush()

    def sweep(self) -> None:
        """Delete every stored unit of the chat (not a chunk) that no page kept."""
        info = self.info
        stored = np.fromiter(
            (
                int(r[0])
                for r in self.conn.execute(
                    "SELECT unit_id FROM units WHERE account = ? AND chat_id = ?"
                    " AND kind != 'conversation'",
                    (info.account, info.chat_id),
                )
            ),
            dtype=np.int64,
        )
        stale = np.setdiff1d(stored, np.asarray(self.kept, dtype=np.int64)).tolist()
        for start in range(0, len(stale), _IN_CHUNK):
            chunk = stale[start : start + _IN_CHUNK]
            marks = ",".join("?" * len(chunk))
            self.writer.delete(
                stored_units(self.conn, info.account, info.chat_id, f"unit_id IN ({marks})", chunk)
            )
        self.writer.flush()


def _windows(pages: _Pages, cfg: CutConfig) -> None:
    """Each topic's windows, walked a page at a time."""
    info = pages.info
    topics = {
        None if r[0] is None else int(r[0])
        for r in pages.conn.execute(
            "SELECT DISTINCT topic_id FROM ingest.messages WHERE account = ? AND chat_id = ?",
            (info.account, info.chat_id),
        )
    }
    for topic in sorted(topics, key=lambda t: (t is not None, t or 0)):
        cursor: tuple[int, int] | None = None
        page = PAGE
        while True:
            msgs = loader.load_topic_page(
                pages.conn, info.account, info.chat_id, topic, cursor, page
            )
            full = len(msgs) == page
            cut = recut_from(msgs, 0, cfg)
            if full and len(cut) < 2:
                page *= 2  # one window is still open: read on until it closes
                continue
            pages.sync(cut[:-1] if full else cut)
            if not full:
                break
            cursor, page = (cut[-1].first_date, cut[-1].msg_ids[0]), PAGE


def _threads(pages: _Pages, cfg: CutConfig) -> None:
    """Every reply thread, found from the chat's reply graph and cut root by root."""
    info = pages.info
    ids, topics, replies, heads = array("q"), array("q"), array("q"), array("q")
    firsts: dict[tuple[int | None, int], int] = {}
    # Positions are chronological ranks (``iter_chat`` reads in ``chrono_key`` order), so an
    # album's first photo is its head, and "comes first" compares positions.
    for m in loader.iter_chat(pages.conn, info.account, info.chat_id):
        if not is_unit_member(m):
            continue
        at = len(ids)
        ids.append(m.msg_id)
        topics.append(_NONE if m.topic_id is None else m.topic_id)
        replies.append(_NONE if m.reply_to is None else m.reply_to)
        heads.append(
            at if m.grouped_id is None else firsts.setdefault((m.topic_id, m.grouped_id), at)
        )
    del firsts
    if not ids:
        return
    parents = _album_parents(ids, topics, replies, heads)
    del topics, replies
    n = len(ids)
    own = np.arange(n)
    root = np.where(parents >= 0, parents, own)
    while True:  # every parent comes first: follow parents up, doubling the stride
        up = root[root]
        if np.array_equal(up, root):
            break
        root = up
    has_child = np.zeros(n, dtype=bool)
    has_child[parents[parents >= 0]] = True
    member_root = root[np.asarray(heads, dtype=np.int64)]
    del root, heads, parents, own
    members = np.flatnonzero(has_child[member_root])
    members = members[np.argsort(member_root[members], kind="stable")]
    thread_of = member_root[members]
    del has_child, member_root
    if not len(members):
        return
    id_at = np.asarray(ids, dtype=np.int64)
    del ids
    starts = np.flatnonzero(np.r_[True, thread_of[1:] != thread_of[:-1]]).tolist()
    starts.append(len(members))
    first = 0  # the first thread of the page
    for last in range(len(starts) - 1):
        if starts[last + 1] - starts[first] < PAGE and last < len(starts) - 2:
            continue
        roots = id_at[thread_of[starts[first : last + 1]]].tolist()
        wanted = id_at[members[starts[first] : starts[last + 1]]].tolist()
        pool = loader.load_ids(pages.conn, info.account, info.chat_id, wanted)
        pages.sync(cut_threads(pool.values(), cfg, roots=roots))
        first = last + 1


def _album_parents(
    ids: array[int], topics: array[int], replies: array[int], heads: array[int]
) -> np.ndarray:
    """Each album head's counted parent head, by position (-1: none).

    ``cutting._album_edges`` over the columns: a reply edge counts when its target is a member
    of the same topic that comes first; an album takes the edge of its earliest replying photo
    whose target's head comes before its own.
    """
    n = len(ids)
    id_col = np.asarray(ids, dtype=np.int64)
    order = np.argsort(id_col, kind="stable")
    sorted_ids = id_col[order]
    reply = np.asarray(replies, dtype=np.int64)
    at = np.minimum(np.searchsorted(sorted_ids, reply), n - 1)
    target = order[at]
    topic = np.asarray(topics, dtype=np.int64)
    counted = (
        (reply != _NONE)
        & (sorted_ids[at] == reply)
        & (target < np.arange(n))
        & (topic[target] == topic)
    )
    parents = array("q", [-1]) * n
    for child, parent in zip(
        np.flatnonzero(counted).tolist(), target[counted].tolist(), strict=True
    ):
        c, p = heads[child], heads[parent]
        if c != p and parents[c] < 0 and p < c:
            parents[c] = p
    return np.asarray(parents, dtype=np.int64)


def _posts(pages: _Pages, cfg: CutConfig) -> None:
    """A channel's posts with their comments, in pages that never split an album."""
    info = pages.info
    page: list[Msg] = []
    last: Msg | None = None
    for m in loader.iter_chat(pages.conn, info.account, info.chat_id):
        member = is_unit_member(m)
        if member and len(page) >= PAGE and not (last is not None and same_album(last, m)):
            _post_page(pages, page, cfg)
            page = []
        page.append(m)
        if member:
            last = m
    _post_page(pages, page, cfg)


def _post_page(pages: _Pages, posts: list[Msg], cfg: CutConfig) -> None:
    info = pages.info
    comments: dict[int, list[Msg]] = {}
    if posts and info.linked_chat_id is not None:
        for c in loader.comments_of(
            pages.conn,
            info.account,
            info.linked_chat_id,
            info.chat_id,
            [p.msg_id for p in posts],
        ):
            if c.comment_of is not None and c.comment_of[0] == info.chat_id:
                comments.setdefault(c.comment_of[1], []).append(c)
    pages.sync(cut_posts(posts, comments, cfg))
