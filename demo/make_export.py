#!/usr/bin/env python3
"""Build chatseek's own demo export from the dialogue sources in ``demo/source/``.

Writes, deterministically:

* ``demo/export/result.json`` — a whole-account Telegram Desktop export ("Export Telegram
  data", JSON): six chats, written for chatseek, with replies, forum topics, a channel and its
  discussion group, reactions, edits, forwards, media placeholders, a poll, a location, a venue
  and service messages;
* ``demo/export/files/lease_terms.pdf`` — the one attachment included in the export;
* ``demo/questions.jsonl`` — retrieval smoke questions keyed to message ids.

Usage::

    python demo/make_export.py            # (re)write the three outputs
    python demo/make_export.py --check    # exit 0 when the committed files match, 1 otherwise
    python demo/make_export.py --check --skip-pdf   # the JSON and questions only
    python demo/make_export.py --out DIR  # write into DIR instead of demo/

The dialogue sources use a small line format (see ``demo/README.md``)::

    @ 2024-09-03 18:40                         set the chat's clock (Europe/Madrid wall time)
    topic t_docs | topic general               forum: default topic of the next messages
    +7m sofia =bank_a1 >bank_q {r=👍3}: text   gap, sender, label, reply, options, text
    | more text                                continuation line of the previous message
    +0 !pin/sofia {msg=bank_sum}               a service message (action/actor)

Only the standard library is needed for the JSON; the PDF needs reportlab and the DejaVu Sans
font (Cyrillic), and its bytes depend on their versions. ``--check`` always compares the JSON
and the questions; it compares the PDF bytes when reportlab and the font are here (otherwise
only the PDF's size, which the JSON records).
"""

from __future__ import annotations

import argparse
import calendar
import io
import json
import random
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "source"
NOT_INCLUDED = "(File not included. Change data exporting settings to download.)"
PDF_REL = "files/lease_terms.pdf"
FONT_PATHS = (
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/local/share/fonts/DejaVuSans.ttf",
    "/Library/Fonts/DejaVuSans.ttf",
)
FONT_BOLD_PATHS = tuple(p.replace("DejaVuSans.ttf", "DejaVuSans-Bold.ttf") for p in FONT_PATHS)

# --- people and chats ---

OWNER = "ilya"
PEOPLE: dict[str, tuple[str, int, str | None]] = {
    # key: (display name, user id, username)
    "ilya": ("Ilya Morozov", 418275093, "ilya_mrz"),
    "lena": ("Лена Ковалёва", 5237714402, None),
    "dima": ("Dmitry Orlov", 286450173, "dima_orlov"),
    "sofia": ("Sofía Martínez", 1093826475, "sofia_vlc"),
    "tom": ("Tom Hughes", 734019288, "tomhughes"),
    "priya": ("Priya Nair", 6021547730, "priya_n"),
    "marina": ("Марина Белова", 973366105, "marinabelova"),
    "artem": ("Артём Гусев", 5519080261, None),
    "katie": ("Katie Brennan", 1847203356, "katiebrennan"),
    "oleg": ("Олег Петренко", 392718640, "oleg_p"),
    "nino": ("Nino Beridze", 6674102538, "nino_b"),
    "anya": ("Аня Смирнова", 7012384459, None),
}


@dataclass(frozen=True)
class ChatSpec:
    key: str
    name: str
    type: str
    id: int
    source: str
    first_id: int  # ignored for chats on the account-wide id sequence
    max_gap: int  # deleted/unexported messages leave gaps of up to this many ids


_SG, _CH = "public_supergroup", "public_channel"
CHATS = (
    ChatSpec("valencia", "Expats Valencia", _SG, 1864203571, "valencia.txt", 48213, 3),
    ChatSpec("forum", "Relocate: Spain & Georgia", _SG, 2197750348, "forum.txt", 1, 2),
    ChatSpec("channel", "Valencia Expat Notes", _CH, 2034618827, "channel.txt", 1, 2),
    ChatSpec("comments", "Valencia Expat Notes — Chat", _SG, 2041377906, "comments.txt", 1, 2),
    ChatSpec("lena", "Лена Ковалёва", "personal_chat", 5237714402, "lena.txt", 0, 0),
    ChatSpec("hike", "Поход в Кальдерону 🥾", "private_group", 4092716635, "hike.txt", 0, 0),
)
# Private chats and basic groups share the account's message id sequence.
ACCOUNT_SEQUENCE = ("lena", "hike")
ACCOUNT_FIRST_ID = 201544

POLLS: dict[str, dict[str, Any]] = {
    "hike_date": {
        "question": "Garbí hike — which day? / Поход на Гарби — какой день?",
        "closed": True,
        "answers": [
            ("Sat 15 Feb / суббота 15.02", 9, True),
            ("Sun 16 Feb / воскресенье 16.02", 4, False),
            ("Sat 22 Feb / суббота 22.02", 3, False),
            ("Can't come this time / в этот раз без меня", 2, False),
        ],
    },
}
LOCATIONS: dict[str, tuple[float, float]] = {
    "garbi_parking": (39.676904, -0.359802),
}
VENUES: dict[str, tuple[float, float, str, str]] = {
    "betera_station": (
        39.589521,
        -0.462127,
        "Estació de Bétera (Metrovalencia)",
        "Carrer de l'Estació, 46117 Bétera, Valencia",
    ),
}

# --- time: the export was made on a computer set to Europe/Madrid ---


def _last_sunday(year: int, month: int) -> int:
    last = calendar.monthrange(year, month)[1]
    return last - (calendar.weekday(year, month, last) + 1) % 7


def madrid_offset_hours(local: datetime) -> int:
    """UTC offset of a Madrid wall time (EU rules: summer time from the last Sunday of March
    02:00 to the last Sunday of October 03:00)."""
    y = local.year
    start = datetime(y, 3, _last_sunday(y, 3), 2)
    end = datetime(y, 10, _last_sunday(y, 10), 3)
    return 2 if start <= local < end else 1


def unixtime(local: datetime) -> int:
    return calendar.timegm(local.timetuple()) - 3600 * madrid_offset_hours(local)


# --- parsing the dialogue sources ---

_LINE_RE = re.compile(r"^\+(?P<gap>\S+)\s+(?P<head>[^:]*?)\s*(?::(?:\s(?P<text>.*)|$)|$)")
_GAP_RE = re.compile(r"(\d+)([dhms]?)")
_OPTS_RE = re.compile(r"\{([^}]*)\}")


@dataclass
class Msg:
    chat: str
    index: int
    who: str
    gap: timedelta
    exact: bool
    label: str | None
    reply: str | None
    opts: dict[str, str]
    text: str
    line: int
    topic: str | None = None
    action: str | None = None
    date: datetime | None = None
    id: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def parse_gap(spec: str) -> tuple[timedelta, bool]:
    total = 0
    pos = 0
    exact = True
    for m in _GAP_RE.finditer(spec):
        if m.start() != pos:
            raise ValueError(f"bad gap {spec!r}")
        pos = m.end()
        n, unit = int(m.group(1)), m.group(2) or "m"
        total += n * {"d": 86400, "h": 3600, "m": 60, "s": 1}[unit]
        if unit != "s":
            exact = False
    if pos != len(spec):
        raise ValueError(f"bad gap {spec!r}")
    return timedelta(seconds=total), exact


def parse_source(chat: str, path: Path) -> tuple[list[Msg], list[tuple[int, datetime]]]:
    msgs: list[Msg] = []
    clocks: list[tuple[int, datetime]] = []  # (index of next message, wall time)
    topic: str | None = None
    for lineno, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.rstrip()
        if not line.strip() or line.startswith("//"):
            continue
        where = f"{path.name}:{lineno}"
        if line.startswith("|"):
            if not msgs:
                raise ValueError(f"{where}: continuation without a message")
            msgs[-1].text += "\n" + line[2:] if len(line) > 1 else "\n"
            continue
        if line.startswith("@ "):
            clocks.append((len(msgs), datetime.strptime(line[2:].strip(), "%Y-%m-%d %H:%M")))
            continue
        if line.startswith("topic "):
            name = line.split()[1]
            topic = None if name == "general" else name
            continue
        m = _LINE_RE.match(line)
        if not m:
            raise ValueError(f"{where}: cannot parse {line!r}")
        gap, exact = parse_gap(m.group("gap"))
        head = m.group("head")
        opts: dict[str, str] = {}
        om = _OPTS_RE.search(head)
        if om:
            for part in om.group(1).split(";"):
                part = part.strip()
                if part:
                    k, _, v = part.partition("=")
                    opts[k.strip()] = v.strip()
            head = head[: om.start()] + head[om.end() :]
        who = label = reply = None
        for tok in head.split():
            if tok.startswith("="):
                label = tok[1:]
            elif tok.startswith(">"):
                reply = tok[1:]
            elif who is None:
                who = tok
            else:
                raise ValueError(f"{where}: unexpected token {tok!r}")
        who = who or ""  # a channel post has no sender of its own
        text = m.group("text") or ""
        msg = Msg(chat, len(msgs), who, gap, exact, label, reply, opts, text, lineno)
        if who.startswith("!"):
            msg.action, _, msg.who = who[1:].partition("/")
        msg.topic = topic
        msgs.append(msg)
    return msgs, clocks


def schedule(
    chat: str,
    msgs: list[Msg],
    clocks: list[tuple[int, datetime]],
    anchor: Callable[[Msg], datetime | None] = lambda m: None,
) -> None:
    """Give every message a wall time: clock + gaps, with deterministic seconds.

    ``anchor`` pins a message to a given time (a discussion-group copy of a channel post comes
    a few seconds after the post); the messages after it count their gaps from there.
    """
    rng = random.Random(f"time:{chat}")
    marks = dict(clocks)
    now: datetime | None = None
    prev: datetime | None = None
    for msg in msgs:
        if msg.index in marks:
            clock = marks[msg.index]
            now = clock + timedelta(seconds=rng.randint(0, 40))
            prev = None  # a clock may go back: a forum's sources are written topic by topic
        if now is None:
            raise ValueError(f"{chat}: message before any clock (line {msg.line})")
        step = msg.gap
        if not msg.exact:
            wobble = rng.randint(-25, 25) if step >= timedelta(minutes=2) else rng.randint(3, 50)
            step += timedelta(seconds=wobble)
        elif step == timedelta(0):
            step = timedelta(seconds=rng.randint(1, 4))
        step = max(step, timedelta(seconds=1))
        pinned = anchor(msg)
        if pinned is not None:
            if prev is not None and pinned <= prev:
                raise ValueError(f"{chat}: anchored message goes back in time (line {msg.line})")
            now = pinned
        else:
            now = now + step
        if prev is not None and now <= prev:
            raise ValueError(f"{chat}: message goes back in time (line {msg.line})")
        msg.date = prev = now


# --- text with entities ---

_ENTITY_RE = re.compile(
    r"\[(?P<tl_text>[^\]]+)\]\((?P<tl_href>[^)\s]+)\)"
    r"|\*\*(?P<bold>.+?)\*\*"
    r"|`(?P<code>[^`]+)`"
    r"|\{\{(?P<mn_text>[^|}]+)\|(?P<mn_who>\w+)\}\}"
    r"|(?P<url>https?://[^\s<>\"]+)"
    r"|(?<![\w@])(?P<mention>@[A-Za-z][A-Za-z0-9_]{3,31})"
    r"|(?<![\w#&])(?P<hashtag>#[^\W\d_][\w]*)"
)


def render_text(text: str) -> tuple[Any, list[dict[str, Any]]]:
    """(``text`` field, ``text_entities``) the way Telegram Desktop writes them."""
    if not text:
        return "", []
    runs: list[dict[str, Any]] = []
    pos = 0

    def plain(s: str) -> None:
        if s:
            runs.append({"type": "plain", "text": s})

    for m in _ENTITY_RE.finditer(text):
        plain(text[pos : m.start()])
        pos = m.end()
        if m.group("tl_text"):
            href = m.group("tl_href")
            runs.append({"type": "text_link", "text": m.group("tl_text"), "href": href})
        elif m.group("bold"):
            runs.append({"type": "bold", "text": m.group("bold")})
        elif m.group("code"):
            runs.append({"type": "code", "text": m.group("code")})
        elif m.group("mn_text"):
            uid = PEOPLE[m.group("mn_who")][1]
            runs.append({"type": "mention_name", "text": m.group("mn_text"), "user_id": uid})
        elif m.group("url"):
            url = m.group("url")
            trail = len(url) - len(url.rstrip(".,;:!?)"))
            if trail:
                url, pos = url[:-trail], pos - trail
            runs.append({"type": "link", "text": url})
        elif m.group("mention"):
            runs.append({"type": "mention", "text": m.group("mention")})
        else:
            runs.append({"type": "hashtag", "text": m.group("hashtag")})
    plain(text[pos:])
    if all(r["type"] == "plain" for r in runs):
        joined = "".join(r["text"] for r in runs)
        return joined, [{"type": "plain", "text": joined}]
    field_runs: list[Any] = [r["text"] if r["type"] == "plain" else dict(r) for r in runs]
    return field_runs, runs


# --- building the export ---


def iso(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%S")


def peer_user(key: str) -> tuple[str, str]:
    name, uid, _ = PEOPLE[key]
    return name, f"user{uid}"


class Builder:
    def __init__(self, pdf_size: int) -> None:
        self.pdf_size = pdf_size
        self.specs = {c.key: c for c in CHATS}
        self.msgs: dict[str, list[Msg]] = {}
        self.labels: dict[tuple[str, str], Msg] = {}
        for spec in CHATS:
            msgs, clocks = parse_source(spec.key, SOURCE / spec.source)
            schedule(spec.key, msgs, clocks, self._post_copy_time)
            msgs.sort(key=lambda m: (m.date, m.index))
            self.msgs[spec.key] = msgs
            for msg in msgs:
                if msg.label:
                    key = (spec.key, msg.label)
                    if key in self.labels:
                        raise ValueError(f"{spec.key}: label {msg.label!r} used twice")
                    self.labels[key] = msg
        self._assign_ids()

    def _post_copy_time(self, msg: Msg) -> datetime | None:
        if msg.who != "~":
            return None
        post = self.ref("channel", msg.reply or "", msg.line)
        assert post.date is not None
        return post.date + timedelta(seconds=2)

    def _assign_ids(self) -> None:
        for spec in CHATS:
            if spec.key in ACCOUNT_SEQUENCE:
                continue
            rng = random.Random(f"ids:{spec.key}")
            next_id = spec.first_id
            for msg in self.msgs[spec.key]:
                msg.id = next_id
                next_id += 1 if rng.random() < 0.8 else rng.randint(2, 1 + spec.max_gap)
        merged = sorted(
            (m for key in ACCOUNT_SEQUENCE for m in self.msgs[key]),
            key=lambda m: (m.date, ACCOUNT_SEQUENCE.index(m.chat), m.index),
        )
        rng = random.Random("ids:account")
        next_id = ACCOUNT_FIRST_ID
        for msg in merged:
            msg.id = next_id
            next_id += rng.randint(1, 2) if rng.random() < 0.6 else rng.randint(3, 40)

    def ref(self, chat: str, label: str, line: int) -> Msg:
        if label.startswith("~"):
            chat, label = "channel", label[1:]
        try:
            return self.labels[(chat, label)]
        except KeyError:
            raise ValueError(f"{chat}: unknown label {label!r} (line {line})") from None

    def message(self, spec: ChatSpec, msg: Msg) -> dict[str, Any]:
        assert msg.date is not None
        out: dict[str, Any] = {"id": msg.id, "type": "service" if msg.action else "message"}
        out["date"] = iso(msg.date)
        out["date_unixtime"] = str(unixtime(msg.date))
        opts = msg.opts
        if "e" in opts:
            rng = random.Random(f"edit:{spec.key}:{msg.index}")
            edited = msg.date + timedelta(minutes=float(opts["e"]), seconds=rng.randint(0, 50))
            out["edited"] = iso(edited)
            out["edited_unixtime"] = str(unixtime(edited))
        if msg.action:
            return self._service(spec, msg, out)
        text, source = msg.text, msg
        if msg.who == "~":  # the discussion group's copy of a channel post
            post = self.ref("channel", msg.reply or "", msg.line)
            chan = self.specs["channel"]
            out["from"] = chan.name
            out["from_id"] = f"channel{chan.id}"
            out["forwarded_from"] = chan.name
            out["forwarded_from_id"] = f"channel{chan.id}"
            opts = _inherit(post, opts)
            text, source = post.text, post
            reply = None
        elif spec.type.endswith("channel"):
            out["from"] = spec.name
            out["from_id"] = f"channel{spec.id}"
            if "author" in opts:
                out["author"] = PEOPLE[opts["author"]][0]
            reply = msg.reply
        else:
            if msg.who not in PEOPLE:
                raise ValueError(f"{spec.key}: unknown sender {msg.who!r} (line {msg.line})")
            out["from"], out["from_id"] = peer_user(msg.who)
            reply = msg.reply
        if "copy" in opts:  # a forward of a channel post: same text, same media
            post = self.ref("channel", opts["copy"], msg.line)
            chan = self.specs["channel"]
            text, source = post.text, post
            opts = _inherit(post, opts)
            out["forwarded_from"] = chan.name
            out["forwarded_from_id"] = f"channel{chan.id}"
        if "fwd" in opts:
            name, _, peer = opts["fwd"].partition("|")
            out["forwarded_from"] = name
            if peer:
                out["forwarded_from_id"] = peer
        if reply is None and msg.topic is not None:
            reply = msg.topic
        if reply:
            target = self.ref(spec.key, reply, msg.line)
            if target.id >= msg.id:
                raise ValueError(f"{spec.key}: reply to a later message (line {msg.line})")
            out["reply_to_message_id"] = target.id
        self._media(source, out, opts)
        out["text"], out["text_entities"] = render_text(text)
        if "r" in opts:
            out["reactions"] = reactions(opts["r"])
        return out

    def _media(self, source: Msg, out: dict[str, Any], opts: dict[str, str]) -> None:
        """Media fields; ``source`` is the message the media belongs to (a copy's original)."""
        rng = random.Random(f"media:{source.chat}:{source.index}")
        if "photo" in opts:
            w, h = (int(x) for x in (opts["photo"] or "1280x960").split("x"))
            out["photo"] = NOT_INCLUDED
            out["photo_file_size"] = rng.randint(80_000, 320_000)
            out["width"], out["height"] = w, h
        elif "sticker" in opts:
            out["file"] = NOT_INCLUDED
            out["file_name"] = "sticker.webp"
            out["file_size"] = rng.randint(18_000, 48_000)
            out["thumbnail"] = NOT_INCLUDED
            out["thumbnail_file_size"] = rng.randint(4_000, 9_000)
            out["media_type"] = "sticker"
            out["sticker_emoji"] = opts["sticker"]
            out["mime_type"] = "image/webp"
            out["width"], out["height"] = 512, 512
        elif "file" in opts:
            if opts["file"] != "lease":
                raise ValueError(f"{source.chat}: unknown file {opts['file']!r}")
            out["file"] = PDF_REL
            out["file_name"] = "lease_terms.pdf"
            out["file_size"] = self.pdf_size
            out["mime_type"] = "application/pdf"
        elif "poll" in opts:
            poll = POLLS[opts["poll"]]
            answers = [{"text": t, "voters": v, "chosen": c} for t, v, c in poll["answers"]]
            out["poll"] = {
                "question": poll["question"],
                "closed": poll["closed"],
                "total_voters": sum(a["voters"] for a in answers),
                "answers": answers,
            }
        elif "loc" in opts:
            lat, lon = LOCATIONS[opts["loc"]]
            out["location_information"] = {"latitude": lat, "longitude": lon}
        elif "venue" in opts:
            lat, lon, name, address = VENUES[opts["venue"]]
            out["place_name"] = name
            out["address"] = address
            out["location_information"] = {"latitude": lat, "longitude": lon}

    def _service(self, spec: ChatSpec, msg: Msg, out: dict[str, Any]) -> dict[str, Any]:
        action = msg.action
        if msg.who in ("", "chat"):
            out["actor"], out["actor_id"] = spec.name, f"channel{spec.id}"
        else:
            out["actor"], out["actor_id"] = peer_user(msg.who)
        if action == "join":
            out["action"] = "join_group_by_link"
            out["inviter"] = "Group"
        elif action == "pin":
            out["action"] = "pin_message"
            out["message_id"] = self.ref(spec.key, msg.opts["msg"], msg.line).id
        elif action == "topic":
            out["action"] = "topic_created"
            out["title"] = msg.text
        elif action == "create_channel":
            out["action"] = "create_channel"
            out["title"] = msg.text
        elif action == "create_group":
            out["action"] = "create_group"
            out["title"] = msg.text
            out["members"] = [PEOPLE[k][0] for k in msg.opts["members"].split(",")]
        elif action == "invite":
            out["action"] = "invite_members"
            out["members"] = [PEOPLE[k][0] for k in msg.opts["members"].split(",")]
        else:
            raise ValueError(f"{spec.key}: unknown action {action!r} (line {msg.line})")
        out["text"] = ""
        out["text_entities"] = []
        return out

    def export(self) -> dict[str, Any]:
        name, uid, username = PEOPLE[OWNER]
        first, last = name.split(" ", 1)
        chats = []
        for spec in CHATS:
            chats.append(
                {
                    "name": spec.name,
                    "type": spec.type,
                    "id": spec.id,
                    "messages": [self.message(spec, m) for m in self.msgs[spec.key]],
                }
            )
        return {
            "about": (
                "Here is the data you requested. This is chatseek's demo export: every chat, "
                "person and message in it was written for the chatseek project and is fictional."
            ),
            "personal_information": {
                "user_id": uid,
                "first_name": first,
                "last_name": last,
                "phone_number": "+99966 1 2345",
                "username": f"@{username}",
                "bio": "Valencia · backend dev · hiking on weekends",
            },
            "chats": {"about": "This page lists all chats from this export.", "list": chats},
        }

    def questions(self) -> list[dict[str, Any]]:
        out = []
        for q in QUESTIONS:
            spec = self.specs[q["chat"]]
            ids = sorted(self.ref(spec.key, label, 0).id for label in q["gold"])
            out.append(
                {
                    "qid": q["qid"],
                    "chat_name": spec.name,
                    "chat_folder": "export",
                    "chat_id": spec.id,
                    "question": q["question"],
                    "answer": q["answer"],
                    "category": q["category"],
                    "lang": q["lang"],
                    "gold_message_ids": ids,
                }
            )
        return out


def _inherit(post: Msg, opts: dict[str, str]) -> dict[str, str]:
    """A copy's options: the post's media, not its reactions, edit or signature."""
    kept = {k: v for k, v in post.opts.items() if k not in ("r", "e", "author")}
    return {**kept, **opts}


def reactions(spec: str) -> list[dict[str, Any]]:
    out = []
    for item in spec.split():
        m = re.fullmatch(r"(\D+?)(\d+)", item)
        if not m:
            raise ValueError(f"bad reaction {item!r}")
        out.append({"type": "emoji", "count": int(m.group(2)), "emoji": m.group(1)})
    return out


# --- questions (gold = labels in the dialogue sources) ---

QUESTIONS: list[dict[str, Any]] = []


def _load_questions() -> None:
    lines = (SOURCE / "questions.txt").read_text(encoding="utf-8").splitlines()
    for lineno, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("//"):
            continue
        parts = [p.strip() for p in line.split(" || ")]
        if len(parts) != 7:
            raise ValueError(f"questions.txt:{lineno}: expected 7 fields, got {len(parts)}")
        qid, chat, lang, category, gold, question, answer = parts
        QUESTIONS.append(
            {
                "qid": qid,
                "chat": chat,
                "lang": lang,
                "category": category,
                "gold": gold.split(","),
                "question": question,
                "answer": answer,
            }
        )


# --- the PDF ---


class PdfUnavailable(Exception):
    """reportlab or the DejaVu font is missing here."""


def build_pdf() -> bytes:
    """The lease terms PDF (English and Russian), byte-identical for the same reportlab and
    font versions (reportlab's invariant mode fixes dates and document ids)."""
    try:
        from reportlab import rl_config
        from reportlab.lib.pagesizes import A4
        from reportlab.lib.styles import ParagraphStyle
        from reportlab.lib.units import mm
        from reportlab.pdfbase import pdfmetrics
        from reportlab.pdfbase.ttfonts import TTFont
        from reportlab.platypus import Paragraph, SimpleDocTemplate, Spacer
    except ImportError:
        raise PdfUnavailable("reportlab is not installed") from None

    regular = next((p for p in FONT_PATHS if Path(p).is_file()), None)
    bold = next((p for p in FONT_BOLD_PATHS if Path(p).is_file()), None)
    if regular is None or bold is None:
        raise PdfUnavailable("DejaVu Sans not found (apt-get install -y fonts-dejavu-core)")
    rl_config.invariant = 1
    pdfmetrics.registerFont(TTFont("DejaVuSans", regular))
    pdfmetrics.registerFont(TTFont("DejaVuSans-Bold", bold))
    head = ParagraphStyle("head", fontName="DejaVuSans-Bold", fontSize=13, leading=17, spaceAfter=6)
    body = ParagraphStyle("body", fontName="DejaVuSans", fontSize=10, leading=14, spaceAfter=4)
    item = ParagraphStyle(
        "item", parent=body, leftIndent=5 * mm, bulletIndent=0, bulletFontName="DejaVuSans"
    )
    story: list[Any] = []
    for line in (SOURCE / "lease_terms.txt").read_text(encoding="utf-8").splitlines():
        if line.startswith("//"):
            continue
        if not line.strip():
            story.append(Spacer(1, 8 * mm))
        elif line.startswith("# "):
            story.append(Paragraph(line[2:], head))
        elif line.startswith("- "):
            story.append(Paragraph(line[2:], item, bulletText="•"))
        else:
            story.append(Paragraph(line, body))
    story.append(Spacer(1, 8 * mm))
    buf = io.BytesIO()
    doc = SimpleDocTemplate(
        buf,
        pagesize=A4,
        title="Lease terms / Условия аренды",
        author="chatseek demo",
        subject="Fictional lease terms written for the chatseek demo export",
        leftMargin=20 * mm,
        rightMargin=20 * mm,
        topMargin=18 * mm,
        bottomMargin=18 * mm,
    )
    doc.build(story)
    return buf.getvalue()


# --- main ---


def render(pdf_size: int) -> tuple[bytes, bytes]:
    """The bytes of result.json and questions.jsonl."""
    _load_questions()
    builder = Builder(pdf_size)
    doc = json.dumps(builder.export(), ensure_ascii=False, indent=1) + "\n"
    questions = "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in builder.questions())
    return doc.encode("utf-8"), questions.encode("utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument(
        "--check", action="store_true", help="compare with the committed files; 1 if any differs"
    )
    ap.add_argument(
        "--skip-pdf",
        action="store_true",
        help="leave the PDF alone (take its size from the file on disk); the PDF bytes depend on "
        "the reportlab and DejaVu font versions, the JSON only on this script and demo/source/",
    )
    ap.add_argument("--out", type=Path, default=HERE, help="output folder (default: demo/)")
    args = ap.parse_args(argv)
    pdf_path = args.out / "export" / PDF_REL
    json_path = args.out / "export" / "result.json"
    questions_path = args.out / "questions.jsonl"
    pdf: bytes | None = None
    if not args.skip_pdf:
        try:
            pdf = build_pdf()
        except PdfUnavailable as exc:
            if not args.check:
                print(f"cannot build the PDF: {exc}", file=sys.stderr)
                return 2
            print(f"{exc}: checking the PDF's size only", file=sys.stderr)
    if pdf is None and not pdf_path.is_file():
        print(f"missing: {pdf_path}", file=sys.stderr)
        return 1
    size = len(pdf) if pdf is not None else pdf_path.stat().st_size
    doc, questions = render(size)
    outputs = [(json_path, doc), (questions_path, questions)]
    if pdf is not None:
        outputs.append((pdf_path, pdf))
    if args.check:
        stale = [p for p, data in outputs if not p.is_file() or p.read_bytes() != data]
        for p in stale:
            print(f"differs: {p}", file=sys.stderr)
        return 1 if stale else 0
    for p, data in outputs:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        print(f"wrote {p} ({len(data)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
