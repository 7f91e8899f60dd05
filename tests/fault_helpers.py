"""Helpers for the fault-injection and load tests: a private stack, kill points, settling, checks.

A kill point is one way to stop a service for good in the middle of an operation: SIGKILL from
outside at a moment chosen on the clock, or SIGKILL from inside just before (or after) its n-th
writing COMMIT (``CHATSEEK_FAULT_KILL_AT``, installed by ``chatseek_testing.faults``). After a
kill the stack is brought back with ``chatseek stack up`` (without the fault variable), the
interrupted operation is re-run where a user would re-run it, and ``check_store`` requires a
converged, complete store.
``python -m tests.fault_helpers ingest-fake`` serves ingest over a deterministic ``FakeTelegram``
so that a sync can be interrupted in a real process; with ``CHATSEEK_TEST_FAKE_WORLD=accounts``
it serves two accounts (``home`` and ``work``, each with its own session file) that both read
one public channel, and applies the deletions a test lists in ``<home>/fake-deletions.json``;
with ``albums`` it serves one group, "Flat hunt", where three-photo albums get replies.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chatseek_core import db
from chatseek_core.settings import SERVICES
from chatseek_ingest.auth import ENV_API_HASH, ENV_API_ID
from chatseek_testing.faults import FAULT_KILL_ENV, armed_env
from tests.stack_helpers import alive, cli, cli_json, stack_env

__all__ = [
    "KillPoint",
    "Operation",
    "Stack",
    "check_store",
    "exported_messages",
    "fake_world_messages",
    "kill",
    "outstanding",
    "settle",
    "delete_in_fake_world",
    "start_fake_ingest",
    "start_stack",
    "stored_messages",
    "wait_dead",
]

ROOT = Path(__file__).resolve().parent.parent
SETTLE_TIMEOUT_S = 300.0
DEATH_TIMEOUT_S = 30.0
POLL_S = 0.3
FAKE_CHANNEL = 700
FAKE_GROUP = 701
FAKE_CHANNEL_POSTS = 1500
FAKE_GROUP_MESSAGES = 2500
FAKE_SESSION = "fake-session:1000"
CHANNEL_MARK = 1_000_000_000_000
FAKE_API = {ENV_API_ID: "12345", ENV_API_HASH: "0123456789abcdef"}
WORLD_ENV = "CHATSEEK_TEST_FAKE_WORLD"
DELETIONS_FILE = "fake-deletions.json"
SHARED_CHANNEL = 500
HOME_USER = 1000
WORK_USER = 2000
SHARED_POSTS = (
    "water outage on Friday in the old town",
    "the new tram line to the airport opens in March",
    "the farmers market moves to the river bank",
)
ALBUM_GROUP = 900
ALBUM_CAPTIONS = (
    "two rooms on the third floor, 900 a month",
    "the kitchen was renovated last year",
    "balcony facing the sea",
)
ALBUM_CHATTER = (
    "does anyone have a drill to lend?",
    "the bakery on the corner closes early today",
    "who is going to the concert on Friday?",
    "my bike got a flat tyre again",
    "the bus 14 is late every morning",
    "any tips for a good dentist?",
    "the library has new opening hours",
    "lost keys near the fountain, blue keyring",
)


@dataclass(frozen=True)
class KillPoint:
    """One exercised kill point: the operation, the service and how it was killed."""

    operation: str
    service: str
    how: str

    def label(self) -> str:
        return f"{self.operation}/{self.service}/{self.how}"


@dataclass
class Stack:
    """A private local stack under ``home`` (fresh ports, fake models)."""

    home: Path
    env: dict[str, str]

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    def recorded_pid(self, service: str) -> int | None:
        """The pid the stack last recorded for ``service``, alive or not."""
        try:
            return int((self.home / "run" / f"{service}.pid").read_text().strip())
        except (OSError, ValueError):
            return None

    def pid(self, service: str) -> int | None:
        """The live pid the stack recorded for ``service``, if any."""
        pid = self.recorded_pid(service)
        return pid if pid is not None and alive(pid) else None

    def up(self, *, fault: str | None = None) -> None:
        """Start whatever is down; with ``fault``, the started services carry the kill point.

        An armed service may reach its kill point before ``stack up`` has seen it SERVING; that
        start is not an error.
        """
        env = armed_env(self.env, fault) if fault is not None else dict(self.env)
        proc = cli(env, "stack", "up", check=fault is None)
        if proc.returncode != 0 and "exited with code -9" not in proc.stderr:
            raise AssertionError(f"chatseek stack up exited {proc.returncode}: {proc.stderr}")

    def down(self) -> None:
        """``chatseek stack down``, when any service of this stack is still alive."""
        if any(self.pid(name) is not None for name in SERVICES):
            cli(self.env, "stack", "down", check=False)

    def stop(self, service: str) -> None:
        """Stop ``service`` gracefully (SIGTERM) and wait until it is gone."""
        pid = self.pid(service)
        if pid is None:
            return
        os.kill(pid, signal.SIGTERM)
        if not wait_dead(pid):
            raise AssertionError(f"{service} ({pid}) did not stop after SIGTERM")

    def arm(self, service: str, fault: str) -> None:
        """Restart ``service`` alone so that it carries the kill point ``fault``."""
        self.stop(service)
        self.up(fault=fault)


def start_stack(home: Path, **extra: str) -> Stack:
    """A private stack on fresh ports, up and SERVING."""
    stack = Stack(home=home, env=stack_env(home, **extra))
    stack.env.pop(FAULT_KILL_ENV, None)
    stack.up()
    return stack


def wait_dead(pid: int, timeout_s: float = DEATH_TIMEOUT_S) -> bool:
    """Wait until ``pid`` is gone; True when it is."""
    deadline = time.monotonic() + timeout_s
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not alive(pid)


def kill(stack: Stack, service: str) -> bool:
    """SIGKILL ``service`` now; True when it was alive and is now gone."""
    pid = stack.pid(service)
    if pid is None:
        return False
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    if not wait_dead(pid):
        raise AssertionError(f"{service} ({pid}) survived SIGKILL")
    return True


# --- reading the stores (read-only, from outside the services) ---


def _open_ro(data_dir: Path) -> db.Connection:
    conn = db.connect(":memory:", vec=True)
    for owner in ("ingest", "unitize", "lexical", "vector"):
        path = data_dir / f"{owner}.db"
        if path.exists():
            db.attach_readonly(conn, path, owner)
    return conn


def _scalar(conn: db.Connection, sql: str, params: tuple[Any, ...] = ()) -> int:
    row = conn.execute(sql, params).fetchone()
    return int(row[0] or 0) if row else 0


def _attached(conn: db.Connection) -> set[str]:
    return {str(r[1]) for r in conn.execute("PRAGMA database_list")}


def _cursor(conn: db.Connection, schema: str, feed: str) -> int:
    return _scalar(
        conn, f"SELECT COALESCE(MAX(seq), 0) FROM {schema}._cursors WHERE feed = ?", (feed,)
    )


def _head(conn: db.Connection, schema: str) -> int:
    return _scalar(conn, f"SELECT COALESCE(MAX(seq), 0) FROM {schema}._feed")


def outstanding(stack: Stack, service: str) -> bool:
    """Whether a consumer stage still has committed work it has not applied.

    ``embed`` counts as busy while vector has work. Any missing file means "not started yet",
    which is outstanding work too.
    """
    conn = _open_ro(stack.data_dir)
    try:
        have = _attached(conn)
        if service == "unitize":
            if not {"ingest", "unitize"} <= have:
                return True
            return _cursor(conn, "unitize", "ingest") < _head(conn, "ingest")
        if service == "lexical":
            if not {"ingest", "unitize", "lexical"} <= have:
                return True
            return _cursor(conn, "lexical", "ingest") < _head(conn, "ingest") or _cursor(
                conn, "lexical", "unitize"
            ) < _head(conn, "unitize")
        if service in ("vector", "embed"):
            if not {"unitize", "vector"} <= have:
                return True
            pending = _scalar(conn, "SELECT COUNT(*) FROM vector.pending_units")
            return pending > 0 or _cursor(conn, "vector", "unitize") < _head(conn, "unitize")
        return False
    finally:
        conn.close()


def settle(stack: Stack, timeout_s: float = SETTLE_TIMEOUT_S) -> dict[str, Any]:
    """Wait until every stage has consumed its feeds and nothing waits for a vector.

    A status call that fails (a service still starting) is retried until the deadline.
    """
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        try:
            doc = cli_json(stack.env, "status", "--json")
        except (AssertionError, json.JSONDecodeError, subprocess.TimeoutExpired) as exc:
            last = exc
            time.sleep(POLL_S)
            continue
        services = {s["name"]: s for s in doc["services"]}
        last = services
        lags = [
            v
            for n in ("unitize", "lexical", "vector")
            for v in (services[n].get("feed_lag") or {}).values()
        ]
        pending = (services["vector"].get("details") or {}).get("pending") or 0
        ready = (services["lexical"].get("details") or {}).get("words_ready")
        recut = (services["unitize"].get("details") or {}).get("recut_pending") or 0
        healthy = all(s.get("health") == "SERVING" for s in services.values())
        if healthy and ready and lags and not any(lags) and not pending and not recut:
            return services
        time.sleep(POLL_S)
    raise AssertionError(f"the stack did not settle in {timeout_s:.0f} s: {last}")


# --- what should be there ---


def exported_messages(result_json: Path) -> dict[str, list[int]]:
    """Chat title → every message id (service messages included) of a Telegram export."""
    doc = json.loads(result_json.read_text(encoding="utf-8"))
    chats = doc["chats"]["list"] if "chats" in doc else [doc]
    return {str(c["name"]): [int(m["id"]) for m in c["messages"]] for c in chats}


def stored_messages(data_dir: Path, account: str = "default") -> dict[str, list[int]]:
    """Chat title → every stored message id, one entry per stored row (duplicates kept)."""
    conn = db.connect(data_dir / "ingest.db", readonly=True)
    try:
        out: dict[str, list[int]] = {}
        for title, msg_id in conn.execute(
            "SELECT c.title, m.msg_id FROM messages m JOIN chats c"
            " ON c.account = m.account AND c.chat_id = m.chat_id WHERE m.account = ?",
            (account,),
        ):
            out.setdefault(str(title), []).append(int(msg_id))
        return out
    finally:
        conn.close()


def check_store(stack: Stack, expected: dict[str, list[int]]) -> None:
    """Require ``verify`` ok, every expected message stored once, and every index complete.

    Call after ``settle``: then "complete" means no stage is behind, nothing is pending, every
    message is in the message index and every unit is in the word index and has a vector.
    """
    report = cli_json(stack.env, "verify", "--json")
    assert report["ok"], json.dumps(report, indent=1)[:4000]

    stored = stored_messages(stack.data_dir)
    for title, ids in expected.items():
        have = Counter(stored.get(title, []))
        want = Counter(ids)
        missing = sorted(set(want) - set(have))
        doubled = sorted(i for i, n in have.items() if n > 1)
        assert not missing, f"{title}: {len(missing)} exported messages missing: {missing[:10]}"
        assert not doubled, f"{title}: messages stored twice: {doubled[:10]}"
        assert set(have) == set(want), f"{title}: stored ids the export does not have"

    conn = _open_ro(stack.data_dir)
    try:
        checks = {
            "unitize behind ingest": _head(conn, "ingest") - _cursor(conn, "unitize", "ingest"),
            "lexical behind ingest": _head(conn, "ingest") - _cursor(conn, "lexical", "ingest"),
            "lexical behind unitize": _head(conn, "unitize") - _cursor(conn, "lexical", "unitize"),
            "vector behind unitize": _head(conn, "unitize") - _cursor(conn, "vector", "unitize"),
            "units waiting for a vector": _scalar(
                conn, "SELECT COUNT(*) FROM vector.pending_units"
            ),
            "messages not in the message index": _scalar(
                conn,
                "SELECT COUNT(*) FROM ingest.messages m WHERE NOT EXISTS"
                " (SELECT 1 FROM lexical.indexed_messages i WHERE i.mid = m.mid)",
            ),
            "units not in the word index": _scalar(
                conn,
                "SELECT COUNT(*) FROM unitize.units u WHERE NOT EXISTS"
                " (SELECT 1 FROM lexical.indexed_units i WHERE i.unit_id = u.unit_id)",
            ),
            "units without a current vector": _scalar(
                conn,
                "SELECT COUNT(*) FROM unitize.units u WHERE NOT EXISTS"
                " (SELECT 1 FROM vector.embedded_units e JOIN vector.spaces s"
                "  ON s.space_id = e.space_id AND s.current = 1 WHERE e.unit_id = u.unit_id)",
            ),
            "messages with text in no unit": _scalar(
                conn,
                "SELECT COUNT(*) FROM ingest.messages m WHERE m.kind = 'message'"
                " AND (m.text <> '' OR EXISTS (SELECT 1 FROM ingest.media md WHERE md.mid = m.mid))"
                " AND NOT EXISTS (SELECT 1 FROM unitize.unit_members um"
                "  WHERE um.account = m.account AND um.chat_id = m.chat_id"
                "  AND um.msg_id = m.msg_id)",
            ),
        }
        units = _scalar(conn, "SELECT COUNT(*) FROM unitize.units")
    finally:
        conn.close()
    checks["work folders a killed import left behind"] = len(
        [p for p in (stack.data_dir / "tmp").glob("import-*") if p.is_dir()]
    )
    problems = {k: v for k, v in checks.items() if v}
    assert not problems, problems
    assert units > 0


# --- the operation under test, run as the user runs it ---


@dataclass
class Operation:
    """A CLI command running in the background, so a service can be killed under it."""

    args: tuple[str, ...]
    proc: subprocess.Popen[str]
    started: float

    @classmethod
    def start(cls, stack: Stack, *args: str) -> Operation:
        proc = subprocess.Popen(
            [sys.executable, "-m", "chatseek_gateway.cli", *args],
            env=stack.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        return cls(args=args, proc=proc, started=time.monotonic())

    def running(self) -> bool:
        return self.proc.poll() is None

    def finish(self, timeout_s: float = 240.0) -> tuple[int, str, str]:
        out, err = self.proc.communicate(timeout=timeout_s)
        return self.proc.returncode, out, err


# --- a real ingest process over a deterministic fake Telegram (sync kill points) ---


def _fake_world() -> Any:
    from chatseek_testing.telegram import FakeTelegram

    tg = FakeTelegram()
    channel = tg.add_channel(FAKE_CHANNEL, "Fault Channel", username=f"chan{FAKE_CHANNEL}")
    for n in range(FAKE_CHANNEL_POSTS):
        tg.send(channel, f"post {n} about rent deposit and the bank")
    group = tg.add_channel(FAKE_GROUP, "Fault Group", username=f"group{FAKE_GROUP}", megagroup=True)
    for n in range(FAKE_GROUP_MESSAGES):
        tg.send(group, f"message {n}: аренда квартиры, залог, visa and permit")
    return tg


def _fake_albums() -> Any:
    """ "Flat hunt": a question, a three-photo album answering it (a caption on each photo), a
    reply to the album's last photo, and chatter before and after."""
    from chatseek_testing.telegram import FakeTelegram

    tg = FakeTelegram()
    group = tg.add_channel(ALBUM_GROUP, "Flat hunt", username="flathunt", megagroup=True)
    marta = tg.add_user(91, "Marta")
    leo = tg.add_user(92, "Leo")
    tg.send(group, "the tram strike ends tomorrow", sender=leo)
    question = tg.send(group, "anyone seen a flat near the old port?", sender=leo)
    photos = tg.album(group, 3, sender=marta, captions=ALBUM_CAPTIONS, reply_to=question.id)
    tg.send(group, "lovely, is it still free?", sender=leo, reply_to=photos[-1].id)
    tg.send(group, "yes, the viewing is on Saturday", sender=marta)
    for text in ALBUM_CHATTER:
        tg.send(group, text, sender=leo)
    garden = tg.album(group, 3, "our garden in spring", sender=leo)
    tg.send(group, "are those tulips?", sender=marta, reply_to=garden[1].id)
    return tg


def fake_world_messages() -> dict[str, list[int]]:
    """Chat title → message ids of the fake Telegram world ``ingest-fake`` serves."""
    world = _fake_world()
    return {
        "Fault Channel": world.stored_ids(world.entity(-CHANNEL_MARK - FAKE_CHANNEL)),
        "Fault Group": world.stored_ids(world.entity(-CHANNEL_MARK - FAKE_GROUP)),
    }


def _fake_accounts() -> tuple[Any, Any]:
    """``home`` (Ana) and ``work`` (Ana at work): one public channel both read, a chat each."""
    from chatseek_testing.telegram import FakeTelegram

    home = FakeTelegram(me_id=HOME_USER, me_name="Ana", connected=False)
    work = FakeTelegram(me_id=WORK_USER, me_name="Ana at work", connected=False)
    for tg in (home, work):
        channel = tg.add_channel(SHARED_CHANNEL, "City news", username="citynews")
        for text in SHARED_POSTS:
            tg.send(channel, text)
    family = home.add_channel(600, "Family", megagroup=True)
    granny = home.add_user(61, "Granny")
    home.send(family, "dinner at grandma's house on Sunday, bring the apple pie", sender=granny)
    home.send(family, "I will bake the apple pie for Sunday dinner")
    team = work.add_channel(800, "Team", megagroup=True)
    boss = work.add_user(81, "Boss")
    work.send(
        team, "the invoice totals for March are wrong, please recheck the invoice", sender=boss
    )
    work.send(team, "I will fix the invoice totals before the Tuesday deploy")
    return home, work


def delete_in_fake_world(stack: Stack, user_id: int, chat_id: int, msg_id: int) -> None:
    """Delete a message for everyone in the account ``user_id`` of the running fake world.

    The fake ingest applies it before it next hands out that account's client.
    """
    path = stack.home / DELETIONS_FILE
    listed = json.loads(path.read_text()) if path.exists() else []
    listed.append([user_id, chat_id, msg_id])
    path.write_text(json.dumps(listed))


def start_fake_ingest(
    stack: Stack, *, fault: str | None = None, world: str = "faults"
) -> subprocess.Popen[bytes]:
    """Serve ingest on the stack's ingest address over a fake world; wait until SERVING."""
    from chatseek_core.probe import check

    env = dict(stack.env)
    env[WORLD_ENV] = world
    env.update(FAKE_API)
    env["CHATSEEK_LISTEN"] = env["CHATSEEK_INGEST_ADDR"]
    env["CHATSEEK_DATA_DIR"] = str(stack.data_dir)
    env["PYTHONUNBUFFERED"] = "1"
    env = armed_env(env, fault)
    (stack.home / "run").mkdir(parents=True, exist_ok=True)
    out = open(stack.home / "run" / "ingest-fake.out", "ab")  # noqa: SIM115 - the child's
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fault_helpers", "ingest-fake"],
        env=env,
        cwd=str(ROOT),
        stdout=out,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    out.close()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the fake ingest exited {proc.returncode}")
        if check(env["CHATSEEK_INGEST_ADDR"], timeout=1.0) == "SERVING":
            (stack.home / "run" / "ingest.pid").write_text(str(proc.pid))
            return proc
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("the fake ingest did not become SERVING")


def _serve_fake_ingest() -> None:
    from chatseek_core.runner import Running, run
    from chatseek_core.settings import Settings
    from chatseek_ingest.auth import write_session
    from chatseek_ingest.server import create_server, open_deps

    if os.environ.get(WORLD_ENV) == "accounts":
        _serve_fake_accounts()
        return
    world = _fake_albums() if os.environ.get(WORLD_ENV) == "albums" else _fake_world()

    def factory(session: str, api_id: int, api_hash: str) -> Any:
        return world

    async def start(settings: Settings) -> Running:
        write_session(settings.home, settings.account, FAKE_SESSION)
        return create_server(settings, open_deps(settings, telegram_factory=factory))

    run("ingest", start)


def _serve_fake_accounts() -> None:
    from chatseek_core.runner import Running, run
    from chatseek_core.settings import Settings
    from chatseek_ingest.auth import write_session
    from chatseek_ingest.server import create_server, open_deps
    from chatseek_testing.telegram import fake_factory

    home, work = _fake_accounts()
    by_user = {HOME_USER: home, WORK_USER: work}
    hand_out = fake_factory(home, work)
    applied: set[tuple[int, int, int]] = set()

    async def start(settings: Settings) -> Running:
        deletions = settings.home / DELETIONS_FILE

        def factory(session: str, api_id: int, api_hash: str) -> Any:
            listed = json.loads(deletions.read_text()) if deletions.exists() else []
            for user_id, chat_id, msg_id in listed:
                if (user_id, chat_id, msg_id) not in applied:
                    applied.add((user_id, chat_id, msg_id))
                    by_user[user_id].delete(chat_id, msg_id)
            return hand_out(session, api_id, api_hash)

        write_session(settings.home, "home", f"fake-session:{HOME_USER}")
        write_session(settings.home, "work", f"fake-session:{WORK_USER}")
        return create_server(settings, open_deps(settings, telegram_factory=factory))

    run("ingest", start)


def main(argv: list[str]) -> int:
    """``python -m tests.fault_helpers ingest-fake``: the fake-Telegram ingest process."""
    if argv[1:] != ["ingest-fake"]:
        print("usage: python -m tests.fault_helpers ingest-fake", file=sys.stderr)
        return 2
    _serve_fake_ingest()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
