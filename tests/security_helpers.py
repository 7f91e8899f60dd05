"""Helpers of the hostile-input, security and deletion tests.

* ``mutated_exports``: a Hypothesis strategy that damages a real export (truncation, wrong JSON
  types, missing keys, huge strings, invalid UTF-8, deep nesting) and records what it did.
* ``write_export``: a small whole-account export written from chat and message specs.
* ``listening_addresses``: the TCP addresses a set of processes listen on, read from ``/proc``.
* ``python -m tests.security_helpers``: the ingest service over a ``FakeTelegram`` whose login,
  session and channel carry the planted secrets (the fake replaces Telethon and nothing else).
"""

from __future__ import annotations

import copy
import ipaddress
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

# --- planted secrets ---

PLANTED_PHONE = "+15557319046"
PLANTED_CODE = "73190"
PLANTED_PASSWORD = "orchid-lantern-5519"
PLANTED_API_ID = "7319046"
PLANTED_API_HASH = "9f3c2e7a1b8d4f6e0a5c3b7d9e1f2a4c"
PLANTED_ME_ID = 7319046001
PLANTED_SESSION = f"fake-session:{PLANTED_ME_ID}"
PLANTED_MCP_TOKEN = "mcp-tok-Qz8vR2xK7pL4nW9sT3yB6mD1"
PLANTED_TOKEN_IN_TEXT = "ghp_Zk4Jq9Wm2Rv7Xc5Tb8Ny3Lp6Hd1Fs0Ga"
PLANTED_SESSION_IN_TEXT = "1BJWap1sBu7Vr5Kq3Zx9Mn2Lp8Wc4Td6Yh0Gf"
PLANTED_CHANNEL_ID = 1_888_000_001
PLANTED_CHANNEL_USERNAME = "plantedchannel"
# Words that exist only in message text: seeing one in a log means message text was logged.
TEXT_MARKERS = ("wombatquasar", "накидкафрегат", "pelicanzircon", "ocelotmarimba")
SECRETS = {
    "phone": PLANTED_PHONE.lstrip("+")[1:],
    "login code": f"code {PLANTED_CODE}",
    "2FA password": PLANTED_PASSWORD,
    "API hash": PLANTED_API_HASH,
    "session": PLANTED_SESSION,
    "MCP token": PLANTED_MCP_TOKEN,
    "token in a message": PLANTED_TOKEN_IN_TEXT,
    "session in a message": PLANTED_SESSION_IN_TEXT,
}
SYNCED_POSTS = (
    f"pelicanzircon: the relay key is {PLANTED_TOKEN_IN_TEXT}",
    f"ocelotmarimba call me on {PLANTED_PHONE}",
)


# --- exports ---

BASE_DATE = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Msg:
    """One message of a generated export; ``minute`` counts from ``BASE_DATE``."""

    msg_id: int
    minute: int
    sender: str
    text: str
    reply_to: int | None = None


def _message(msg: Msg, senders: dict[str, int]) -> dict[str, Any]:
    when = BASE_DATE + timedelta(minutes=msg.minute)
    row: dict[str, Any] = {
        "id": msg.msg_id,
        "type": "message",
        "date": when.strftime("%Y-%m-%dT%H:%M:%S"),
        "date_unixtime": str(int(when.timestamp())),
        "from": msg.sender,
        "from_id": f"user{senders.setdefault(msg.sender, 5000 + len(senders))}",
        "text": msg.text,
        "text_entities": [{"type": "plain", "text": msg.text}],
    }
    if msg.reply_to is not None:
        row["reply_to_message_id"] = msg.reply_to
    return row


def write_export(folder: Path, chats: Sequence[tuple[str, str, int, Sequence[Msg]]]) -> Path:
    """Write a whole-account export of ``(name, export type, id, messages)`` chats.

    Returns:
        ``folder``, holding ``result.json``.
    """
    senders: dict[str, int] = {}
    doc = {
        "about": "Here is the data you requested.",
        "personal_information": {"user_id": 4999, "first_name": "Owner"},
        "chats": {
            "about": "This page lists all chats from this export.",
            "list": [
                {
                    "name": name,
                    "type": kind,
                    "id": chat_id,
                    "messages": [_message(m, senders) for m in messages],
                }
                for name, kind, chat_id, messages in chats
            ],
        },
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "result.json").write_text(
        json.dumps(doc, ensure_ascii=False, indent=1), encoding="utf-8"
    )
    return folder


def planted_export(folder: Path) -> Path:
    """An export whose messages carry every planted secret and the text markers."""
    chat = [
        Msg(1, 0, "Lena", f"wombatquasar: my number is {PLANTED_PHONE}"),
        Msg(2, 1, "Marco", f"накидкафрегат api_hash={PLANTED_API_HASH}", reply_to=1),
        Msg(3, 2, "Lena", f"session string {PLANTED_SESSION_IN_TEXT} and {PLANTED_SESSION}"),
        Msg(4, 3, "Marco", f"deploy token {PLANTED_TOKEN_IN_TEXT} and {PLANTED_MCP_TOKEN}"),
        Msg(5, 4, "Lena", f"login code {PLANTED_CODE}, 2FA {PLANTED_PASSWORD}", reply_to=3),
    ]
    return write_export(folder, [("Planted Secrets", "private_supergroup", 1_777_000_001, chat)])


# --- mutation fuzzing of real exports ---

MUTATIONS = ("wrong_type", "missing_key", "huge_string", "invalid_utf8", "deep_nesting")
WRONG_VALUES: tuple[Any, ...] = (
    None,
    True,
    0,
    -1,
    2**63 - 1,
    2**64,
    -(2**70),
    1.5,
    1e308,
    "",
    "x",
    "user",
    "9" * 30,
    "²",
    "2024-13-45T99:99:99",
    [],
    [None, 1],
    [[{"type": 5}]],
    {},
    {"type": "plain", "text": 5},
)
INVALID_UTF8 = (
    b"\xff",
    b"\xfe\xfe",
    b"\xc3",
    b"\x80",
    b"\xc0\xaf",
    b"\xed\xa0\x80",
    b"\xf4\x90\x80\x80",
    b"\xe2\x82",
)
NESTING_OPENERS = (b"[", b'{"a":')
_CLOSERS = {b"[": b"]", b'{"a":': b"}"}
_MARK = "\ue000chatseek-fuzz-{}\ue000"


@dataclass(frozen=True)
class Mutation:
    """A damaged copy of a fixture export and what was done to it."""

    fixture: str
    data: bytes
    steps: tuple[str, ...]
    cut: bool

    def __repr__(self) -> str:
        return f"Mutation({self.fixture}, {len(self.data)} bytes, {', '.join(self.steps)})"


Slot = tuple[Any, Any, str]


def _slots(node: Any, where: str = "") -> Iterator[Slot]:
    """Every ``(container, key, path)`` of a JSON document, parents before children."""
    items: Iterator[tuple[Any, Any]]
    if isinstance(node, dict):
        items = iter(list(node.items()))
    elif isinstance(node, list):
        items = enumerate(list(node))
    else:
        return
    for key, value in items:
        path = f"{where}.{key}" if where else str(key)
        yield node, key, path
        yield from _slots(value, path)


def mutated_exports(
    fixtures: Sequence[Path], *, max_string: int, max_depth: int
) -> st.SearchStrategy[Mutation]:
    """Damaged copies of ``fixtures``: one to three mutations, then maybe a cut.

    Args:
        fixtures: ``result.json`` files of real exports.
        max_string: the longest huge string, in characters.
        max_depth: the deepest nesting written.
    """
    string_sizes = sorted({64 * 1024, max_string})
    depths = sorted({65, 1000, max_depth})

    @st.composite
    def build(draw: st.DrawFn) -> Mutation:
        path = draw(st.sampled_from(list(fixtures)))
        doc = json.loads(path.read_bytes())
        raw: dict[bytes, bytes] = {}
        steps: list[str] = []
        for _ in range(draw(st.integers(1, 3))):
            kind = draw(st.sampled_from(MUTATIONS))
            every = list(_slots(doc))
            in_chats = [s for s in every if s[2].startswith(("chats.", "left_chats."))]
            pool = draw(st.sampled_from([in_chats, in_chats, in_chats, every])) or every
            container, key, where = draw(st.sampled_from(pool))
            if kind == "missing_key":
                del container[key]
            elif kind == "wrong_type":
                current = container[key]
                # A copy: a later step may mutate inside it, and the next example draws again.
                container[key] = copy.deepcopy(
                    draw(st.sampled_from([v for v in WRONG_VALUES if type(v) is not type(current)]))
                )
            elif kind == "huge_string":
                unit = draw(st.sampled_from(["a", "Ж", "😀", "\\"]))
                container[key] = unit * draw(st.sampled_from(string_sizes))
            else:
                mark = _MARK.format(len(raw))
                container[key] = mark
                quoted = json.dumps(mark, ensure_ascii=False).encode()
                if kind == "invalid_utf8":
                    bad = draw(st.sampled_from(INVALID_UTF8))
                    raw[quoted] = b'"ok' + bad + b'"' if draw(st.booleans()) else bad
                else:
                    opener = draw(st.sampled_from(NESTING_OPENERS))
                    depth = draw(st.sampled_from(depths))
                    raw[quoted] = opener * depth + b"1" + _CLOSERS[opener] * depth
            steps.append(f"{kind} at {where}")
        data = json.dumps(doc, ensure_ascii=False, indent=1).encode()
        for quoted, replacement in raw.items():
            data = data.replace(quoted, replacement)
        cut = draw(st.booleans())
        if cut:
            at = draw(st.integers(0, len(data)))
            padding = b"\x00" * draw(st.sampled_from([0, 0, 4096]))
            data = data[:at] + padding
            steps.append(f"cut at byte {at}" + (" then NUL padding" if padding else ""))
        return Mutation(path.parent.name, data, tuple(steps), cut)

    return build()


# --- sockets ---

_TCP_LISTEN = "0A"


def _socket_inodes(pid: int) -> set[str]:
    out = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    for fd in fd_dir.iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            out.add(target[len("socket:[") : -1])
    return out


def _address(hex_address: str) -> str:
    host, port = hex_address.split(":")
    raw = bytes.fromhex(host)
    if len(raw) == 4:
        text = ".".join(str(b) for b in reversed(raw))
    else:
        words = [raw[i : i + 4][::-1] for i in range(0, 16, 4)]
        address = ipaddress.IPv6Address(b"".join(words))
        # gRPC binds 127.0.0.1 through a dual-stack socket, as ::ffff:127.0.0.1.
        text = str(address.ipv4_mapped or address)
    return f"{text}:{int(port, 16)}"


def listening_addresses(pids: Sequence[int]) -> set[str]:
    """``host:port`` of every TCP socket the processes ``pids`` listen on (IPv4-mapped IPv6
    addresses written as IPv4)."""
    inodes: set[str] = set()
    for pid in pids:
        inodes |= _socket_inodes(pid)
    found = set()
    for table in ("tcp", "tcp6"):
        lines = Path(f"/proc/net/{table}").read_text().splitlines()[1:]
        for line in lines:
            fields = line.split()
            if fields[3] == _TCP_LISTEN and fields[9] in inodes:
                found.add(_address(fields[1]))
    return found


# --- the ingest service over a fake Telegram ---


def planted_telegram() -> Any:
    """A signed-out fake account with a 2FA password and a channel of planted posts."""
    from chatseek_testing.telegram import FakeTelegram

    tg = FakeTelegram(
        me_id=PLANTED_ME_ID,
        me_name="Planted Owner",
        phone=PLANTED_PHONE,
        code=PLANTED_CODE,
        password=PLANTED_PASSWORD,
        authorized=False,
        connected=False,
    )
    channel = tg.add_channel(
        PLANTED_CHANNEL_ID, "Planted Channel", username=PLANTED_CHANNEL_USERNAME
    )
    for text in SYNCED_POSTS:
        tg.send(channel, text)
    return tg


def serve_fake_ingest() -> None:
    """Serve ingest like ``python -m chatseek_ingest``, with ``planted_telegram`` as Telegram."""
    from chatseek_core.runner import Running, run
    from chatseek_core.settings import Settings
    from chatseek_ingest.server import create_server, open_deps

    tg = planted_telegram()

    async def start(settings: Settings) -> Running:
        deps = open_deps(settings, telegram_factory=lambda session, api_id, api_hash: tg)
        return create_server(settings, deps)

    run("ingest", start)


if __name__ == "__main__":
    serve_fake_ingest()
