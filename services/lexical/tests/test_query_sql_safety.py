"""No user text ever reaches an SQL string: every statement is built from fixed fragments."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatseek_core import db
from chatseek_core.errors import ChatseekError
from chatseek_lexical.query import SearchRequest, search, stats

from .conftest_query import RICH, build_store
from .test_query_search import RESULTS

SQL_WORDS = frozenset(
    """
    SELECT FROM WHERE AND OR NOT IN EXISTS AS JOIN LEFT ON ORDER BY LIMIT ASC DESC GROUP COALESCE
    NULLIF IS NULL DISTINCT CASE WHEN THEN ELSE END GLOB MATCH count max min lower bm25 json_each
    value
    rowid msg_fts msg_vocab term ingest messages media chats senders tags accounts
    m md c s r rid score n b mid account chat_id msg_id date text sender_id sender_name topic_id
    type title username history_complete last_fetched_at provider is_active display_name kind
    file_name mime size tag target has_link extracted_text grouped_id
    """.split()
)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


class RecordingConnection:
    """A real connection that remembers every SQL string it is asked to run."""

    def __init__(self, conn: db.Connection) -> None:
        self.conn = conn
        self.statements: list[str] = []

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Any:
        self.statements.append(sql)
        return self.conn.execute(sql, parameters)

    def set_progress_handler(self, handler: Callable[[], int] | None, n: int, /) -> None:
        self.conn.set_progress_handler(handler, n)


@pytest.fixture(scope="module")
def conn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[db.Connection]:
    connection = build_store(Path(tmp_path_factory.mktemp("safety")), RICH)
    yield connection
    connection.close()


def assert_fixed_sql(statements: list[str]) -> None:
    assert statements
    for sql in statements:
        assert "'" not in sql and '"' not in sql, sql
        assert sql.isascii(), sql
        unknown = set(_IDENT.findall(sql)) - SQL_WORDS
        assert not unknown, (unknown, sql)


def record(conn: db.Connection, query: str, **options: Any) -> list[str]:
    recording = RecordingConnection(conn)
    try:
        search(recording, SearchRequest(query, timezone="Europe/Madrid", **options))
    except ChatseekError:
        pass
    return recording.statements


@pytest.mark.parametrize(("query", "_"), RESULTS)
def test_compiled_sql_holds_no_user_text(conn: db.Connection, query: str, _: str) -> None:
    assert_fixed_sql(record(conn, query, limit=2, context=1))


def test_paged_and_counted_sql_holds_no_user_text(conn: db.Connection) -> None:
    recording = RecordingConnection(conn)
    first = search(recording, SearchRequest("alpha OR invoice OR a", limit=1))
    search(
        recording, SearchRequest("alpha OR invoice OR a", limit=1, page_token=first.next_page_token)
    )
    for by in ("chat", "sender", "day", "hour"):
        stats(
            recording, SearchRequest("has:attachment OR invoice"), by=by, timezone="Europe/Madrid"
        )
    assert_fixed_sql(recording.statements)


_USER_WORD = st.text(alphabet="qxzjvkйцукен'\"\\;-()", min_size=3, max_size=12)
_TEMPLATES = st.sampled_from(
    [
        "{}",
        '"{} {}"',
        "{}*",
        "text:/{}.*/",
        "body:/.*{}/",
        "body:{}",
        'from:"{}"',
        'chat:"{}"',
        "tag:{}",
        "filename:{}*",
        'mime:"{}"',
        "{} OR {}",
        "-{} {}",
        "body:[{} TO {}]",
        "from:{}*",
        "tag:/{}/",
    ]
)


def _fill(template: str, word: str) -> str:
    escaped = re.sub(r'([\\"/()\-\'+!:^\[\]{}~*?|&])', r"\\\1", word)
    return template.replace("{}", escaped)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(template=_TEMPLATES, word=_USER_WORD)
def test_generated_queries_never_put_user_text_into_sql(
    conn: db.Connection, template: str, word: str
) -> None:
    assert_fixed_sql(record(conn, _fill(template, word), limit=3))
