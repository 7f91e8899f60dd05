"""Counting: the messages a strict search would find, grouped by chat, sender, day or hour.

Invariants:
* The counted set is exactly search's set (same preparation, same condition); each message is
  counted once.
* Days and hours are local to the request's timezone: the UTC offset in force at each message's
  instant is applied, offset changes found within the data's time span, so DST days group right.
* ``lower_bound`` is true when a searched chat is not completely downloaded: more messages may
  exist than the store holds.
"""

from __future__ import annotations

import dataclasses
import logging
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from chatseek_core.errors import InvalidValue
from chatseek_lexical.query.compile import QueryConnection, Sql
from chatseek_lexical.query.envelope import Bucket, StatsResult
from chatseek_lexical.query.execute import (
    ORDER_NEWEST,
    SearchRequest,
    budgeted,
    prepare,
    query_info,
)
from chatseek_lexical.query.limits import Deadline

__all__ = ["GROUPINGS", "offset_segments", "stats"]

log = logging.getLogger(__name__)

GROUPINGS = ("chat", "sender", "day", "hour")
SECONDS_PER_DAY = 86400
SECONDS_PER_HOUR = 3600
OFFSET_PROBE_SECONDS = 6 * 3600
EPOCH = date(1970, 1, 1)


def _offset(ts: int, tz: ZoneInfo) -> int:
    delta = datetime.fromtimestamp(ts, tz).utcoffset()
    return int(delta.total_seconds()) if delta is not None else 0


def offset_segments(tz: ZoneInfo, start: int, end: int) -> list[tuple[int, int]]:
    """``[(from_ts, utc_offset_seconds)]`` covering ``[start, end]``; the first starts at start.

    Offset changes are located to the second; two changes within one probe step (6 hours) are
    not expected in real zones.
    """
    segments = [(start, _offset(start, tz))]
    probe = start
    while probe < end:
        step = min(probe + OFFSET_PROBE_SECONDS, end)
        current = _offset(step, tz)
        if current != segments[-1][1]:
            low, high = probe, step
            while high - low > 1:
                middle = (low + high) // 2
                if _offset(middle, tz) == current:
                    high = middle
                else:
                    low = middle
            segments.append((high, current))
        probe = step
    return segments


def _local_bucket(segments: list[tuple[int, int]], width: int) -> Sql:
    """``(m.date + offset) / width`` with the offset chosen by a CASE over the segments."""
    params: list[int] = []
    cases = []
    for (_, offset), (next_start, _) in zip(segments, segments[1:], strict=False):
        cases.append("WHEN m.date < ? THEN ?")
        params.extend((next_start, offset))
    params.append(segments[-1][1])
    params.append(width)
    case = "CASE " + " ".join(cases) + " ELSE ? END" if cases else "?"
    return Sql(f"((m.date + {case}) / ?)", tuple(params))


def _label(bucket: int, by: str) -> str:
    if by == "day":
        return (EPOCH + timedelta(days=bucket)).isoformat()
    moment = datetime(1970, 1, 1) + timedelta(hours=bucket)
    return moment.strftime("%Y-%m-%dT%H:00")


def stats(
    conn: QueryConnection, request: SearchRequest, by: str = "chat", timezone: str | None = None
) -> StatsResult:
    """Count the messages ``request`` would find, grouped ``by`` chat, sender, day or hour.

    Args:
        conn: lexical.db with ingest.db attached read-only as ``ingest``.
        request: the same request a search takes (limit, paging and context are ignored).
        by: ``chat``, ``sender``, ``day`` or ``hour``.
        timezone: IANA timezone for days and hours; overrides ``request.timezone``.

    Raises:
        InvalidValue: an unknown grouping; otherwise the errors of ``search``.
    """
    if by not in GROUPINGS:
        raise InvalidValue(
            f"invalid value for by: {by!r} is not one of " + ", ".join(GROUPINGS),
            hint="count by chat, sender, day or hour",
            metadata={"field": "by"},
            candidates=list(GROUPINGS),
        )
    if timezone is not None:
        request = dataclasses.replace(request, timezone=timezone)
    deadline = Deadline(request.budgets.time_ms)
    with budgeted(conn, deadline):
        prepared = prepare(conn, request, deadline)
        where = prepared.where
        buckets: list[Bucket] = []
        if by == "chat":
            rows = conn.execute(
                "SELECT m.account, m.chat_id, count(*) AS n, max(c.title)"
                " FROM ingest.messages AS m LEFT JOIN ingest.chats AS c"
                " ON c.account = m.account AND c.chat_id = m.chat_id"
                f" WHERE {where.text} GROUP BY m.account, m.chat_id"
                " ORDER BY n DESC, m.account, m.chat_id",
                where.params,
            ).fetchall()
            buckets = [Bucket(f"tg:{r[0]}/{r[1]}", str(r[3] or r[1]), int(r[2])) for r in rows]
        elif by == "sender":
            rows = conn.execute(
                "SELECT m.sender_id, count(*) AS n,"
                " max(COALESCE(NULLIF(s.display_name, ?), m.sender_name))"
                " FROM ingest.messages AS m LEFT JOIN ingest.senders AS s"
                " ON s.account = m.account AND s.sender_id = m.sender_id"
                f" WHERE {where.text} GROUP BY m.sender_id ORDER BY n DESC, m.sender_id",
                ("", *where.params),
            ).fetchall()
            buckets = [
                Bucket(None if r[0] is None else int(r[0]), str(r[2] or ""), int(r[1]))
                for r in rows
            ]
        else:
            bounds = conn.execute(
                f"SELECT min(m.date), max(m.date) FROM ingest.messages AS m WHERE {where.text}",
                where.params,
            ).fetchone()
            if bounds[0] is not None:
                segments = offset_segments(prepared.tz, int(bounds[0]), int(bounds[1]))
                width = SECONDS_PER_DAY if by == "day" else SECONDS_PER_HOUR
                bucket = _local_bucket(segments, width)
                rows = conn.execute(
                    f"SELECT {bucket.text} AS b, count(*) FROM ingest.messages AS m"
                    f" WHERE {where.text} GROUP BY b ORDER BY b",
                    (*bucket.params, *where.params),
                ).fetchall()
                buckets = [
                    Bucket(_label(int(r[0]), by), _label(int(r[0]), by), int(r[1])) for r in rows
                ]
    total = sum(b.count for b in buckets)
    log.info("strict count by %s: %d messages in %d buckets", by, total, len(buckets))
    return StatsResult(
        by=by,
        buckets=tuple(buckets),
        total=total,
        lower_bound=not prepared.coverage.complete,
        query=query_info(prepared, ORDER_NEWEST),
        words_ready=request.words_ready,
        coverage=prepared.coverage,
    )
