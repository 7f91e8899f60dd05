"""Deterministic synthetic Telegram Desktop exports for benchmarks (``--messages 100000``).

A whole-account export shaped like a real one: a big bilingual supergroup, a forum with topics,
a channel whose posts are forwarded into its linked discussion group and commented on there, a
private group and a private chat. Words follow a Zipf law over a Russian and an English
vocabulary (everyday words first, then a long tail of made-up words, as real chats have names,
places and typos); message lengths are log-normal; senders have Zipf-distributed activity and
talk in bursts of a few participants separated by pauses; about a fifth of messages reply to a
recent one; some carry photos, documents, voice messages, stickers or links. The same seed and
size always give byte-identical files. The JSON is written as a stream, so a million messages
need no more memory than a thousand.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

__all__ = ["generate", "main", "message_texts"]

START_UNIX = 1_704_067_200  # 2024-01-01T00:00:00Z
RU_WORDS = (
    "квартира аренда залог договор хозяин счёт банк карта перевод комиссия виза ВНЖ NIE DNI"
    " документы налог резидент врач стоматолог страховка школа садик работа зарплата офис"
    " поезд автобус аэропорт билет рейс море пляж горы поход погода дождь жара кот собака"
    " велосипед продам куплю отдам ремонт мастер сантехник электрик интернет роутер SIM тариф"
    " оператор покрытие деньги евро рубль лари налоговая консульство очередь запись справка"
    " переезд соседи район центр рынок магазин кафе ресторан вино сыр хлеб цены дешево дорого"
).split()
EN_WORDS = (
    "flat rent deposit contract landlord account bank card transfer fee visa permit residence"
    " documents tax resident doctor dentist insurance school kindergarten job salary office"
    " train bus airport ticket flight sea beach mountains hike weather rain heat cat dog bike"
    " sell buy free repair plumber electrician internet router SIM plan carrier coverage money"
    " euro consulate queue appointment certificate moving neighbours district centre market"
    " shop cafe restaurant wine cheese bread prices cheap expensive anyone know where how"
).split()
RU_SYLLABLES = (
    "ка ло ми ре ту ва ни до ско про на ры бе ли го ша че жи зу фа хо цы мо ра ст пе сла ви"
).split()
EN_SYLLABLES = "ba ter mon lin gor sta vel pri dun ka ro mi sel tor wen fal hix quo bry lo".split()
TAIL_WORDS = 12_000  # made-up words per language after the everyday ones
VOCABULARY_SEED = 20_240_101
GLUE_RU = "и в на не что как где кто это я ты мы есть был".split()
GLUE_EN = "the a to of and is in it you for on with that".split()
NAMES = (
    "Anna Boris Clara Dmitry Elena Fyodor Galina Igor Julia Kirill Lena Maxim Nina Oleg Pavel"
    " Rita Sergey Tanya Victor Yana Alex Ben Chloe Dan Emma Finn Grace Henry Isla Jack"
).split()
ZIPF_S = 1.1
SENDER_ZIPF_S = 1.0
RUSSIAN_SHARE = 0.6
GLUE_SHARE = 0.3
QUESTION_SHARE = 0.15
REPLY_SHARE = 0.2
REPLY_WINDOW = 30
PHOTO_SHARE = 0.05
DOC_SHARE = 0.01
VOICE_SHARE = 0.01
STICKER_SHARE = 0.015
LINK_SHARE = 0.03
REACTION_SHARE = 0.1
BURST_PAUSE_S = (600, 14_400)
IN_BURST_GAP_S = (5, 240)
BURST_LENGTH = (3, 40)
BURST_PARTICIPANTS = (2, 5)
LENGTH_MU, LENGTH_SIGMA = 2.2, 0.8  # words per message, log-normal
POST_LENGTH_MU = 3.8  # channel posts are longer
COMMENTS_PER_POST = (0, 8)
SHARES = {"supergroup": 0.65, "forum": 0.1, "channel": 0.03, "discussion": 0.07, "group": 0.1}
NOT_INCLUDED = "(File not included. Change data exporting settings to download.)"

MAIN_ID = 1900000001
FORUM_ID = 1900000002
CHANNEL_ID = 1900000003
GROUP_ID = 190000004
DISCUSSION_ID = 1900000005
PRIVATE_ID = 1000000


def _zipf_cumulative(n: int, s: float) -> list[float]:
    return list(itertools.accumulate(1.0 / (rank**s) for rank in range(1, n + 1)))


def _made_up_words(syllables: list[str], count: int, taken: set[str]) -> list[str]:
    rng = random.Random(VOCABULARY_SEED + len(syllables))
    out: list[str] = []
    while len(out) < count:
        word = "".join(rng.choice(syllables) for _ in range(rng.randint(2, 4)))
        if word not in taken:
            taken.add(word)
            out.append(word)
    return out


def _vocabulary(head: list[str], syllables: list[str]) -> list[str]:
    taken = {w.lower() for w in head}
    return head + _made_up_words(syllables, TAIL_WORDS, taken)


RU_VOCABULARY = _vocabulary(RU_WORDS, RU_SYLLABLES)
EN_VOCABULARY = _vocabulary(EN_WORDS, EN_SYLLABLES)
RU_CUMULATIVE = _zipf_cumulative(len(RU_VOCABULARY), ZIPF_S)
EN_CUMULATIVE = _zipf_cumulative(len(EN_VOCABULARY), ZIPF_S)


class _Text:
    """Message texts: Zipf words of one language per message, with glue words between."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def message(self, mu: float = LENGTH_MU) -> str:
        rng = self.rng
        length = max(1, int(rng.lognormvariate(mu, LENGTH_SIGMA)))
        russian = rng.random() < RUSSIAN_SHARE
        words = rng.choices(
            RU_VOCABULARY if russian else EN_VOCABULARY,
            cum_weights=RU_CUMULATIVE if russian else EN_CUMULATIVE,
            k=length,
        )
        glue = GLUE_RU if russian else GLUE_EN
        out = []
        for word in words:
            out.append(word)
            if rng.random() < GLUE_SHARE:
                out.append(rng.choice(glue))
        text = " ".join(out)
        if rng.random() < QUESTION_SHARE:
            text += "?"
        return text[0].upper() + text[1:]


def message_texts(count: int, seed: int = 7) -> list[str]:
    """``count`` message texts drawn as the generator draws them (for embedding samples)."""
    text = _Text(random.Random(seed))
    return [text.message() for _ in range(count)]


class _Senders:
    """Who speaks: Zipf activity overall, a few participants per burst."""

    def __init__(self, rng: random.Random, senders: list[tuple[int, str]]) -> None:
        self.rng = rng
        self.senders = senders
        self.cumulative = _zipf_cumulative(len(senders), SENDER_ZIPF_S)
        self.burst: list[tuple[int, str]] = senders[:1]

    def new_burst(self) -> None:
        size = min(len(self.senders), self.rng.randint(*BURST_PARTICIPANTS))
        self.burst = self.rng.choices(self.senders, cum_weights=self.cumulative, k=size)

    def next(self) -> tuple[int, str]:
        return self.rng.choice(self.burst)


def _date(unix: int) -> dict[str, str]:
    return {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(unix)),
        "date_unixtime": str(unix),
    }


def _attach(rng: random.Random, message: dict[str, Any], msg_id: int, body: str) -> None:
    """Media, links and reactions, each with its share."""
    roll = rng.random()
    if roll < PHOTO_SHARE:
        message["photo"] = NOT_INCLUDED
        message["width"], message["height"] = 1280, 960
    elif roll < PHOTO_SHARE + DOC_SHARE:
        message["file"] = NOT_INCLUDED
        message["file_name"] = f"doc_{msg_id}.pdf"
        message["mime_type"] = "application/pdf"
        message["file_size"] = rng.randint(10_000, 3_000_000)
    elif roll < PHOTO_SHARE + DOC_SHARE + VOICE_SHARE:
        message["file"] = NOT_INCLUDED
        message["media_type"] = "voice_message"
        message["mime_type"] = "audio/ogg"
        message["duration_seconds"] = rng.randint(2, 120)
        body = ""
    elif roll < PHOTO_SHARE + DOC_SHARE + VOICE_SHARE + STICKER_SHARE:
        message["file"] = NOT_INCLUDED
        message["media_type"] = "sticker"
        message["sticker_emoji"] = "👍"
        message["width"], message["height"] = 512, 512
        body = ""
    if body and rng.random() < LINK_SHARE:
        url = f"https://example.org/{rng.choice(EN_WORDS)}/{msg_id}"
        message["text"] = [body + " ", {"type": "link", "text": url}]
        message["text_entities"] = [
            {"type": "plain", "text": body + " "},
            {"type": "link", "text": url},
        ]
    else:
        message["text"] = body
        message["text_entities"] = [{"type": "plain", "text": body}] if body else []
    if rng.random() < REACTION_SHARE:
        message["reactions"] = [{"type": "emoji", "count": rng.randint(1, 12), "emoji": "👍"}]


def _chat_messages(
    rng: random.Random,
    text: _Text,
    count: int,
    first_id: int,
    senders: list[tuple[int, str]],
    *,
    topics: list[int] | None = None,
) -> Iterator[dict[str, Any]]:
    now = START_UNIX + rng.randint(0, 3600)
    who = _Senders(rng, senders)
    recent: list[int] = []
    burst_left = 0
    topic = topics[0] if topics else None
    for offset in range(count):
        msg_id = first_id + offset
        if burst_left <= 0:
            now += rng.randint(*BURST_PAUSE_S)
            burst_left = rng.randint(*BURST_LENGTH)
            who.new_burst()
            if topics:
                topic = rng.choice(topics)
        else:
            now += rng.randint(*IN_BURST_GAP_S)
        burst_left -= 1
        sender_id, sender_name = who.next()
        message: dict[str, Any] = {
            "id": msg_id,
            "type": "message",
            **_date(now),
            "from": sender_name,
            "from_id": f"user{sender_id}",
        }
        if topic is not None and offset > 0:
            message["reply_to_message_id"] = topic
        elif recent and rng.random() < REPLY_SHARE:
            message["reply_to_message_id"] = rng.choice(recent[-REPLY_WINDOW:])
        _attach(rng, message, msg_id, text.message())
        recent.append(msg_id)
        yield message


def _channel_posts(rng: random.Random, text: _Text, count: int) -> list[tuple[int, int, str]]:
    """``(post_id, unix, text)`` of the channel's posts (long texts, a day or so apart)."""
    now = START_UNIX + rng.randint(0, 3600)
    posts = []
    for offset in range(count):
        now += rng.randint(4 * 3600, 48 * 3600)
        posts.append((offset + 1, now, text.message(POST_LENGTH_MU)))
    return posts


def _channel(rng: random.Random, posts: list[tuple[int, int, str]]) -> Iterator[dict[str, Any]]:
    for post_id, unix, body in posts:
        message: dict[str, Any] = {
            "id": post_id,
            "type": "message",
            **_date(unix),
            "from": "Bench News",
            "from_id": f"channel{CHANNEL_ID}",
            "author": rng.choice(NAMES[:3]),
        }
        _attach(rng, message, post_id, body)
        yield message


def _discussion(
    rng: random.Random,
    text: _Text,
    posts: list[tuple[int, int, str]],
    budget: int,
    senders: list[tuple[int, str]],
) -> Iterator[dict[str, Any]]:
    """Each post forwarded into the discussion group, then comments replying to it."""
    who = _Senders(rng, senders)
    msg_id = 1
    written = 0
    for _, unix, body in posts:
        if written >= budget:
            return
        forward = msg_id
        yield {
            "id": forward,
            "type": "message",
            **_date(unix + 2),
            "from": "Bench News",
            "from_id": f"channel{CHANNEL_ID}",
            "forwarded_from": "Bench News",
            "forwarded_from_id": f"channel{CHANNEL_ID}",
            "text": body,
            "text_entities": [{"type": "plain", "text": body}],
        }
        msg_id += 1
        written += 1
        now = unix + 2
        thread = [forward]
        who.new_burst()
        for _ in range(rng.randint(*COMMENTS_PER_POST)):
            if written >= budget:
                return
            now += rng.randint(*IN_BURST_GAP_S) * 3
            sender_id, sender_name = who.next()
            message: dict[str, Any] = {
                "id": msg_id,
                "type": "message",
                **_date(now),
                "from": sender_name,
                "from_id": f"user{sender_id}",
                "reply_to_message_id": forward if rng.random() < 0.7 else rng.choice(thread),
            }
            _attach(rng, message, msg_id, text.message())
            thread.append(msg_id)
            msg_id += 1
            written += 1
            yield message


def _forum(rng: random.Random, text: _Text, count: int, senders: list[tuple[int, str]]) -> Any:
    topics = [1, 2, 3, 4, 5]
    for topic in topics:
        yield {
            "id": topic,
            "type": "service",
            "date": "2024-01-01T00:00:00",
            "date_unixtime": str(START_UNIX + topic),
            "actor": "Anna",
            "actor_id": "user1000000",
            "action": "topic_created",
            "title": f"Topic {topic}",
            "text": "",
            "text_entities": [],
        }
    yield from _chat_messages(rng, text, count, 10, senders, topics=topics)


def _write_chat(out: TextIO, header: dict[str, Any], messages: Iterator[dict[str, Any]]) -> int:
    head = json.dumps(header, ensure_ascii=False)[:-1]
    out.write(head + ', "messages": [\n')
    written = 0
    for message in messages:
        if written:
            out.write(",\n")
        out.write(json.dumps(message, ensure_ascii=False, separators=(",", ":")))
        written += 1
    out.write("\n]}")
    return written


def generate(path: Path, messages: int, seed: int = 7) -> dict[str, int]:
    """Write a whole-account export with about ``messages`` messages; returns counts per chat."""
    rng = random.Random(seed)
    text = _Text(rng)
    senders = [(1_000_000 + i, name) for i, name in enumerate(NAMES)]
    sizes = {name: int(messages * share) for name, share in SHARES.items()}
    sizes["channel"] = max(1, sizes["channel"])
    private_n = max(1, messages - sum(sizes.values()))
    posts = _channel_posts(rng, text, sizes["channel"])
    counts: dict[str, int] = {}
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as out:
        out.write(
            '{"about": "synthetic chatseek benchmark export", "chats": {"about": "", "list": [\n'
        )
        counts["supergroup"] = _write_chat(
            out,
            {"name": "Bench City Expats", "type": "public_supergroup", "id": MAIN_ID},
            _chat_messages(rng, text, sizes["supergroup"], 1, senders),
        )
        out.write(",\n")
        counts["forum"] = _write_chat(
            out,
            {"name": "Bench Forum", "type": "private_supergroup", "id": FORUM_ID},
            _forum(rng, text, sizes["forum"], senders),
        )
        out.write(",\n")
        counts["channel"] = _write_chat(
            out,
            {"name": "Bench News", "type": "public_channel", "id": CHANNEL_ID},
            _channel(rng, posts),
        )
        out.write(",\n")
        counts["discussion"] = _write_chat(
            out,
            {"name": "Bench News — Chat", "type": "public_supergroup", "id": DISCUSSION_ID},
            _discussion(rng, text, posts, sizes["discussion"], senders),
        )
        out.write(",\n")
        counts["group"] = _write_chat(
            out,
            {"name": "Bench Friends", "type": "private_group", "id": GROUP_ID},
            _chat_messages(rng, text, sizes["group"], 1, senders[:6]),
        )
        out.write(",\n")
        counts["private"] = _write_chat(
            out,
            {"name": "Anna", "type": "personal_chat", "id": PRIVATE_ID},
            _chat_messages(rng, text, private_n, 1, senders[:2]),
        )
        out.write("\n]}}\n")
    return counts


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.generate OUT --messages N [--seed S]``."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", type=Path, help="the export folder to write (result.json inside)")
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    counts = generate(args.out / "result.json", args.messages, args.seed)
    print(json.dumps(counts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
