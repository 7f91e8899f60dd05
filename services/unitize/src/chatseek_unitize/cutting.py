"""Cutting a chat's messages into units: windows, reply threads and channel posts.

Invariants:
* Pure and deterministic: the same messages and ``CutConfig`` give the same units, keys and
  hashes. Canonical order is ``chrono_key`` = (date, msg_id).
* Service messages and messages with neither text nor media are not unit members: they never
  appear in a unit and never open, close or count towards a window, thread or post.
* Windows are cut left to right by a state machine that resets at every window boundary, so a
  re-cut that starts at an old window's first message reproduces every later unchanged window.
  ``recut_anchor`` gives that start for a change, ``recut_from`` cuts from it.
* Different topics never share a unit; reply edges across topics are ignored.
* An album (the messages of one media group, ``grouped_id``) is never cut apart: no window,
  thread, post or part closes inside it, and a reply to any of its photos is a reply to the
  album. In a unit its photos are one line group: the first carries the ``[time] Sender:``
  header, each further photo follows on a line of its own, indented (``ALBUM_INDENT``).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping, Sequence

from chatseek_core.errors import InvalidValue
from chatseek_core.render import (
    ALBUM_INDENT,
    MEDIA_TEXT_MAX_CHARS,
    UNKNOWN_SENDER,
    one_line,
    render_line,
    render_lines,
    same_album,
)
from chatseek_unitize.model import RECIPE_VERSION, CutConfig, Msg, Unit, UnitKind, content_hash

__all__ = [
    "ALBUM_INDENT",
    "CHANNEL_CHAT_TYPES",
    "Lines",
    "MEDIA_TEXT_MAX_CHARS",
    "chrono_key",
    "cut_chat",
    "cut_posts",
    "cut_threads",
    "cut_windows",
    "is_unit_member",
    "parent_map",
    "recut_anchor",
    "recut_from",
    "render_line",
    "render_lines",
    "same_album",
    "thread_graph",
    "thread_roots_of",
]

log = logging.getLogger(__name__)

SECONDS_PER_MINUTE = 60

CHANNEL_CHAT_TYPES = frozenset({"channel", "public_channel", "private_channel"})

# --- rendering ---


def chrono_key(m: Msg) -> tuple[int, int]:
    """The canonical chronological sort key of a message: (date, msg_id)."""
    return (m.date, m.msg_id)


def is_unit_member(m: Msg) -> bool:
    """Whether ``m`` belongs in units: not a service message, and some text or media."""
    if m.is_service:
        return False
    # ``isspace`` tells what ``strip`` would leave empty, without making the stripped copy.
    return bool(m.media_kind or m.media_text) or (bool(m.text) and not m.text.isspace())


class Lines:
    """Rendered lines by message, each message rendered at most once per cut and form.

    One instance serves the messages of one chat as read in one transaction: a feed batch
    shares it between its window and thread re-cuts, so a message of both is rendered once.
    A post unit holds messages of two chats (the channel's posts, the discussion group's
    comments) whose ids overlap, so a comment is told apart by its ``comment_of``.
    """

    __slots__ = ("_cache", "_names")

    def __init__(self) -> None:
        self._cache: dict[tuple[int, tuple[int, int] | None, bool], str] = {}
        self._names: dict[str, str] = {}

    def sender(self, m: Msg) -> str:
        """``m``'s sender as a unit lists it: its name on one line, or ``UNKNOWN_SENDER``."""
        name = self._names.get(m.sender_name)
        if name is None:
            name = self._names[m.sender_name] = one_line(m.sender_name) or UNKNOWN_SENDER
        return name

    def __call__(self, m: Msg, continues_album: bool = False) -> str:
        key = (m.msg_id, m.comment_of, continues_album)
        line = self._cache.get(key)
        if line is None:
            line = render_line(m, continues_album=continues_album)
            self._cache[key] = line
        return line


def _make_unit(kind: UnitKind, key: str, seq: Sequence[Msg], lines: Lines) -> Unit:
    text = "\n".join(lines(m, i > 0 and same_album(seq[i - 1], m)) for i, m in enumerate(seq))
    senders: dict[str, None] = {}
    for m in seq:
        senders.setdefault(lines.sender(m), None)
    dates = [m.date for m in seq]
    return Unit(
        kind=kind,
        key=key,
        topic_id=seq[0].topic_id,
        msg_ids=tuple(m.msg_id for m in seq),
        first_date=min(dates),
        last_date=max(dates),
        senders=tuple(senders),
        reactions=sum(m.reactions for m in seq),
        text=text,
        content_hash=content_hash(RECIPE_VERSION, text),
        recipe=RECIPE_VERSION,
    )


def _topic_order(topic: int | None) -> tuple[int, int]:
    return (0, 0) if topic is None else (1, topic)


def _members_by_topic(msgs: Iterable[Msg]) -> dict[int | None, list[Msg]]:
    groups: dict[int | None, list[Msg]] = {}
    for m in msgs:
        if is_unit_member(m):
            groups.setdefault(m.topic_id, []).append(m)
    for seq in groups.values():
        seq.sort(key=chrono_key)
    return {t: groups[t] for t in sorted(groups, key=_topic_order)}


# --- windows ---


def _cut_window_run(members: Sequence[Msg], cfg: CutConfig, lines: Lines) -> list[Unit]:
    """Windows over one topic's members, already in canonical order."""
    units: list[Unit] = []
    gap_s = cfg.window_gap_min * SECONDS_PER_MINUTE
    current: list[Msg] = []
    chars = 0
    for m in members:
        joins_album = bool(current) and same_album(current[-1], m)
        width = len(lines(m, joins_album))
        if (
            current
            and not joins_album
            and (
                m.date - current[-1].date > gap_s
                or len(current) >= cfg.window_max_msgs
                or chars + 1 + width > cfg.window_max_chars
            )
        ):
            units.append(_make_unit("window", f"w:{current[0].msg_id}", current, lines))
            current, chars = [], 0
        chars = width if not current else chars + 1 + width
        current.append(m)
    if current:
        units.append(_make_unit("window", f"w:{current[0].msg_id}", current, lines))
    return units


def cut_windows(msgs: Iterable[Msg], cfg: CutConfig | None = None) -> list[Unit]:
    """Cut chronological windows, separately per topic.

    A window closes at a pause longer than ``window_gap_min`` minutes, after
    ``window_max_msgs`` messages, or before the message whose line would take its text past
    ``window_max_chars``; a single longer message is a window of its own. It never closes
    inside an album: the photos of one media group stay in one window.

    Returns:
        Windows ordered by topic (None first, then by id), then chronologically; each keyed
        ``w:<first msg id>``.
    """
    cfg = cfg or CutConfig()
    lines = Lines()
    units: list[Unit] = []
    for members in _members_by_topic(msgs).values():
        units.extend(_cut_window_run(members, cfg, lines))
    return units


def recut_anchor(
    old_windows: Sequence[Unit], earliest_change: tuple[int, int]
) -> tuple[int, int] | None:
    """Where a window re-cut must start after a change, as a ``chrono_key``.

    The rule: restart at the first message of the last old window that starts before the
    earliest changed (inserted, edited or deleted) message. That window's own closing may
    depend on the changed message; every window before it was closed by an unchanged message
    and stays byte-identical.

    Args:
        old_windows: The previous windows of one topic (any order).
        earliest_change: ``chrono_key`` of the earliest inserted, edited or deleted message.

    Returns:
        The ``chrono_key`` of the restart message, or None to re-cut the topic from its start.
    """
    best: tuple[int, int] | None = None
    for u in old_windows:
        if u.kind != "window":
            continue
        start = (u.first_date, u.msg_ids[0])
        if start < earliest_change and (best is None or start > best):
            best = start
    return best


def recut_from(
    msgs_sorted: Sequence[Msg],
    start_index: int,
    cfg: CutConfig | None = None,
    *,
    lines: Lines | None = None,
) -> list[Unit]:
    """Re-cut the windows of one topic from ``msgs_sorted[start_index]`` on.

    ``msgs_sorted`` is one topic's current messages in ``chrono_key`` order (non-members are
    skipped); ``start_index`` must point at the message ``recut_anchor`` named (or 0). The
    result equals the suffix of ``cut_windows(msgs_sorted)`` from that window on, so unchanged
    windows come back with the same keys and hashes.

    ``lines`` may carry lines already rendered from the same messages (see ``Lines``).

    Raises:
        InvalidValue: ``start_index`` out of range, messages out of order or from two topics.
    """
    cfg = cfg or CutConfig()
    if not 0 <= start_index <= len(msgs_sorted):
        raise InvalidValue("start_index is outside the message list.")
    tail = msgs_sorted[start_index:]
    topics = {m.topic_id for m in tail}
    if len(topics) > 1:
        raise InvalidValue("recut_from takes the messages of one topic.")
    for a, b in zip(tail, tail[1:], strict=False):
        if chrono_key(a) >= chrono_key(b):
            raise InvalidValue("recut_from needs messages sorted by (date, msg_id).")
    members = [m for m in tail if is_unit_member(m)]
    return _cut_window_run(members, cfg, Lines() if lines is None else lines)


# --- threads ---


def parent_map(msgs: Iterable[Msg]) -> dict[int, int]:
    """Reply edges that count for threads: ``{msg_id: parent_id}``.

    An edge counts when both ends are unit members, in the same topic, and the parent comes
    first in ``chrono_key`` order (which also rules out cycles).
    """
    by_id = {m.msg_id: m for m in msgs if is_unit_member(m)}
    edges: dict[int, int] = {}
    for m in by_id.values():
        target = m.reply_to
        if target is None:
            continue
        p = by_id.get(target)
        if p is not None and p.topic_id == m.topic_id and chrono_key(p) < chrono_key(m):
            edges[m.msg_id] = target
    return edges


def thread_roots_of(msg_ids: Iterable[int], parents: Mapping[int, int]) -> list[int]:
    """The thread roots whose threads contain any of ``msg_ids``.

    Args:
        msg_ids: Changed (inserted, edited, deleted) message ids.
        parents: Reply edges as given by ``parent_map`` (before or after the change; callers
            pass both to catch threads a deletion split).

    Returns:
        Sorted distinct root ids (a message without a parent is its own root).
    """
    roots: set[int] = set()
    for start in msg_ids:
        seen = {start}
        node = start
        while node in parents:
            node = parents[node]
            if node in seen:
                break
            seen.add(node)
        roots.add(node)
    return sorted(roots)


def _album_runs(seq: Sequence[Msg]) -> list[list[Msg]]:
    """``seq`` in runs: the adjacent photos of one album together, every other message alone."""
    runs: list[list[Msg]] = []
    for m in seq:
        if runs and same_album(runs[-1][-1], m):
            runs[-1].append(m)
        else:
            runs.append([m])
    return runs


def _split_parts(seq: Sequence[Msg], cap: int) -> list[list[Msg]]:
    """Parts of at most ``cap`` messages, each continuation repeating the root first.

    The root is ``seq``'s first message, or the whole album it opens. A part never closes
    inside an album, and holds more than ``cap`` only where the root and one album need it.
    """
    runs = _album_runs(seq)
    root = runs[0]
    parts = [list(root)]
    for run in runs[1:]:
        if len(parts[-1]) > len(root) and len(parts[-1]) + len(run) > cap:
            parts.append(list(root))
        parts[-1].extend(run)
    return parts


def _album_heads(members: Iterable[Msg]) -> dict[int, int]:
    """Each member's album head: the album's first photo (``chrono_key``), else itself."""
    firsts: dict[tuple[int | None, int], Msg] = {}
    for m in members:
        if m.grouped_id is not None:
            key = (m.topic_id, m.grouped_id)
            known = firsts.get(key)
            if known is None or chrono_key(m) < chrono_key(known):
                firsts[key] = m
    return {
        m.msg_id: (m.msg_id if m.grouped_id is None else firsts[(m.topic_id, m.grouped_id)].msg_id)
        for m in members
    }


def _album_edges(members: Sequence[Msg], heads: Mapping[int, int]) -> dict[int, int]:
    """Reply edges between albums (and single messages), keyed by album head.

    A reply to any photo of an album is a reply to its head; an album replies to what its
    earliest replying photo replies to. An edge counts only when the parent's head comes
    first in ``chrono_key`` order, so the graph stays a forest.
    """
    by_id = {m.msg_id: m for m in members}
    edges: dict[int, int] = {}
    for child, parent in sorted(parent_map(members).items(), key=lambda e: chrono_key(by_id[e[0]])):
        c, p = heads[child], heads[parent]
        if c != p and c not in edges and chrono_key(by_id[p]) < chrono_key(by_id[c]):
            edges[c] = p
    return edges


def thread_graph(msgs: Iterable[Msg]) -> tuple[dict[int, int], dict[int, int]]:
    """The reply graph threads are cut from, an album counting as one message.

    Returns:
        ``(heads, edges)``: each unit member's album head (its album's first photo, else the
        member itself), and the counted reply edges ``{head: parent head}``. Pass ``edges`` to
        ``thread_roots_of`` with heads as ids to find the thread roots.
    """
    members = [m for m in msgs if is_unit_member(m)]
    heads = _album_heads(members)
    return heads, _album_edges(members, heads)


def _cut_threads(
    members: Sequence[Msg], cfg: CutConfig, lines: Lines, roots: Collection[int] | None
) -> list[Unit]:
    by_id = {m.msg_id: m for m in members}
    heads, edges = thread_graph(members)
    photos: dict[int, list[Msg]] = {}
    for m in members:
        photos.setdefault(heads[m.msg_id], []).append(m)
    children: dict[int, list[int]] = {}
    for child, parent in edges.items():
        children.setdefault(parent, []).append(child)
    root_ids = [r for r in children if r not in edges]
    if roots is not None:
        wanted = {heads.get(r, r) for r in roots}
        root_ids = [r for r in root_ids if r in wanted]
    root_ids.sort(key=lambda r: (_topic_order(by_id[r].topic_id), chrono_key(by_id[r])))
    units: list[Unit] = []
    for root_id in root_ids:
        thread: list[Msg] = []
        stack = [root_id]
        while stack:
            node = stack.pop()
            thread.extend(photos[node])
            stack.extend(children.get(node, ()))
        thread.sort(key=chrono_key)
        for part, seq in enumerate(_split_parts(thread, cfg.thread_max_msgs)):
            units.append(_make_unit("thread", f"t:{root_id}:{part}", seq, lines))
    return units


def cut_threads(
    msgs: Iterable[Msg],
    cfg: CutConfig | None = None,
    *,
    roots: Collection[int] | None = None,
    lines: Lines | None = None,
) -> list[Unit]:
    """Cut reply threads.

    A root is a member that got replies and has no parent present (see ``parent_map``); its
    thread is the root and all its descendants in chronological order, in parts of at most
    ``thread_max_msgs`` messages. Part 0 starts with the root; every continuation part repeats
    the root line first, then the next ``thread_max_msgs - 1`` messages.

    An album counts as one message: a reply to any of its photos joins the thread of the whole
    album, which is keyed by (and, as a root, repeated from) its first photo; no part closes
    inside an album. ``roots`` may name any photo of a root album.

    Args:
        msgs: Messages of the chat (or at least every message of the threads wanted).
        cfg: Cutting limits.
        roots: Only cut the threads of these root ids (for incremental re-cuts).
        lines: Lines already rendered from the same messages (see ``Lines``).

    Returns:
        Thread units keyed ``t:<root id>:<part>``, ordered by topic, root date, part.
    """
    cfg = cfg or CutConfig()
    members = [m for m in msgs if is_unit_member(m)]
    return _cut_threads(members, cfg, Lines() if lines is None else lines, roots)


# --- posts ---


def _cut_posts(
    posts: Iterable[Msg],
    comments_by_post: Mapping[int, Sequence[Msg]],
    cfg: CutConfig,
    lines: Lines,
) -> list[Unit]:
    units: list[Unit] = []
    for album in _album_runs(sorted((p for p in posts if is_unit_member(p)), key=chrono_key)):
        post = album[0]
        comments = sorted(
            (
                c
                for member in album
                for c in comments_by_post.get(member.msg_id, ())
                if is_unit_member(c)
            ),
            key=chrono_key,
        )
        seq_all = [*album, *comments]
        for part, seq in enumerate(_split_parts(seq_all, cfg.thread_max_msgs)):
            key = f"p:{post.msg_id}" if part == 0 else f"p:{post.msg_id}:{part}"
            units.append(_make_unit("post", key, seq, lines))
    return units


def cut_posts(
    posts: Iterable[Msg],
    comments_by_post: Mapping[int, Sequence[Msg]] | None = None,
    cfg: CutConfig | None = None,
) -> list[Unit]:
    """One unit per channel post; with comments, the post followed by its comments.

    The posts of one album (media group) are one post: their unit holds every photo's line,
    then the comments on any of them, and is keyed by the album's first post. An album among
    the comments stays whole too.

    Comments (discussion-group messages, keyed by the channel post id they belong to) follow
    in chronological order. A post with more than ``thread_max_msgs - 1`` comments continues
    in parts ``p:<post id>:<n>`` that repeat the post line (an album's lines) first, like
    threads. In a post unit
    ``msg_ids[0]`` is the channel post; the ids after it are discussion-group message ids.

    Returns:
        Post units in chronological order of the posts, keyed ``p:<post id>`` (part 0).
    """
    cfg = cfg or CutConfig()
    return _cut_posts(posts, comments_by_post or {}, cfg, Lines())


# --- whole chat ---


def cut_chat(
    msgs: Iterable[Msg],
    *,
    chat_type: str,
    cfg: CutConfig | None = None,
    comments: Iterable[Msg] | None = None,
) -> list[Unit]:
    """All units of one chat.

    Args:
        msgs: The chat's messages, in any order.
        chat_type: The chat kind; ``channel`` (or an export's ``public_channel`` /
            ``private_channel``) cuts posts, anything else windows and threads.
        cfg: Cutting limits.
        comments: For a channel, the discussion-group messages; each one with ``comment_of``
            set joins the unit of that post.

    Returns:
        Posts for a channel; otherwise windows followed by threads.
    """
    cfg = cfg or CutConfig()
    lines = Lines()
    if chat_type in CHANNEL_CHAT_TYPES:
        by_post: dict[int, list[Msg]] = {}
        for c in comments or ():
            if c.comment_of is not None:
                by_post.setdefault(c.comment_of[1], []).append(c)
        units = _cut_posts(msgs, by_post, cfg, lines)
    else:
        groups = _members_by_topic(msgs)
        units = []
        for members in groups.values():
            units.extend(_cut_window_run(members, cfg, lines))
        everyone = [m for members in groups.values() for m in members]
        units.extend(_cut_threads(everyone, cfg, lines, None))
    log.debug("cut %d units (chat type %s)", len(units), chat_type)
    return units
