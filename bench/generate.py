"""Deterministic synthetic Telegram Desktop exports for benchmarks (``--messages 100000``).

A whole-account export with a big bilingual supergroup, a forum with topics, a channel with a
linked discussion group and a private chat. Text is drawn from a Zipf-distributed Russian and
English vocabulary with realistic lengths; senders come in bursts separated by pauses; about a
fifth of messages reply to a recent one; some carry photos, documents or links. The same seed and
size always give byte-identical files. The JSON is written as a stream, so a million messages
need no more memory than a thousand.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

__all__ = ["generate", "main"]

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
GLUE_RU = "и в на не что как где кто это я ты мы есть был".split()
GLUE_EN = "the a to of and is in it you for on with that".split()
NAMES = (
    "Anna Boris Clara Dmitry Elena Fyodor Galina Igor Julia Kirill Lena Maxim Nina Oleg Pavel"
    " Rita Sergey Tanya Victor Yana Alex Ben Chloe Dan Emma Finn Grace Henry Isla Jack"
).split()
ZIPF_S = 1.1
REPLY_SHARE = 0.2
PHOTO_SHARE = 0.05
DOC_SHARE = 0.01
LINK_SHARE = 0.03
BURST_PAUSE_S = (600, 14_400)
IN_BURST_GAP_S = (5, 240)


def _zipf_weights(n: int) -> list[float]:
    return [1.0 / (rank**ZIPF_S) for rank in range(1, n + 1)]


class _Text:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.ru_w = _zipf_weights(len(RU_WORDS))
        self.en_w = _zipf_weights(len(EN_WORDS))

    def message(self) -> str:
        rng = self.rng
        length = max(1, int(rng.lognormvariate(2.2, 0.8)))
        russian = rng.random() < 0.6
        words = rng.choices(
            RU_WORDS if russian else EN_WORDS, self.ru_w if russian else self.en_w, k=length
        )
        glue = GLUE_RU if russian else GLUE_EN
        out = []
        for word in words:
            out.append(word)
            if rng.random() < 0.3:
                out.append(rng.choice(glue))
        text = " ".join(out)
        if rng.random() < 0.15:
            text += "?"
        return text[0].upper() + text[1:]


def _chat_messages(
    rng: random.Random,
    text: _Text,
    count: int,
    first_id: int,
    senders: list[tuple[int, str]],
    *,
    topics: list[int] | None = None,
    channel: bool = False,
) -> Iterator[dict[str, Any]]:
    now = START_UNIX + rng.randint(0, 3600)
    recent: list[int] = []
    burst_left = 0
    for offset in range(count):
        msg_id = first_id + offset
        if burst_left <= 0:
            now += rng.randint(*BURST_PAUSE_S)
            burst_left = rng.randint(3, 40)
        else:
            now += rng.randint(*IN_BURST_GAP_S)
        burst_left -= 1
        sender_id, sender_name = rng.choice(senders)
        body = text.message()
        message: dict[str, Any] = {
            "id": msg_id,
            "type": "message",
            "date": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)),
            "date_unixtime": str(now),
            "from": sender_name,
            "from_id": f"channel{sender_id}" if channel else f"user{sender_id}",
        }
        if topics and offset > 0:
            message["reply_to_message_id"] = rng.choice(topics)
        elif recent and rng.random() < REPLY_SHARE:
            message["reply_to_message_id"] = rng.choice(recent[-30:])
        roll = rng.random()
        if roll < PHOTO_SHARE:
            message["photo"] = "(File not included. Change data exporting settings to download.)"
            message["width"], message["height"] = 1280, 960
        elif roll < PHOTO_SHARE + DOC_SHARE:
            message["file"] = "(File not included. Change data exporting settings to download.)"
            message["file_name"] = f"doc_{msg_id}.pdf"
            message["mime_type"] = "application/pdf"
            message["file_size"] = rng.randint(10_000, 3_000_000)
        if rng.random() < LINK_SHARE:
            url = f"https://example.org/{rng.choice(EN_WORDS)}/{msg_id}"
            message["text"] = [body + " ", {"type": "link", "text": url}]
            message["text_entities"] = [
                {"type": "plain", "text": body + " "},
                {"type": "link", "text": url},
            ]
        else:
            message["text"] = body
            message["text_entities"] = [{"type": "plain", "text": body}]
        if rng.random() < 0.1:
            message["reactions"] = [{"type": "emoji", "count": rng.randint(1, 12), "emoji": "👍"}]
        recent.append(msg_id)
        yield message


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
    main_n = int(messages * 0.7)
    forum_n = int(messages * 0.1)
    channel_n = max(1, int(messages * 0.05))
    group_n = int(messages * 0.1)
    private_n = max(1, messages - main_n - forum_n - channel_n - group_n)
    counts: dict[str, int] = {}
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as out:
        out.write(
            '{"about": "synthetic chatseek benchmark export", "chats": {"about": "", "list": [\n'
        )
        counts["supergroup"] = _write_chat(
            out,
            {"name": "Bench City Expats", "type": "public_supergroup", "id": 1900000001},
            _chat_messages(rng, text, main_n, 1, senders),
        )
        out.write(",\n")
        topics = [1, 2, 3, 4, 5]
        forum_header = {"name": "Bench Forum", "type": "private_supergroup", "id": 1900000002}

        def forum() -> Iterator[dict[str, Any]]:
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
            yield from _chat_messages(rng, text, forum_n, 10, senders, topics=topics)

        counts["forum"] = _write_chat(out, forum_header, forum())
        out.write(",\n")
        counts["channel"] = _write_chat(
            out,
            {"name": "Bench News", "type": "public_channel", "id": 1900000003},
            _chat_messages(rng, text, channel_n, 1, [(1900000003, "Bench News")], channel=True),
        )
        out.write(",\n")
        counts["group"] = _write_chat(
            out,
            {"name": "Bench Friends", "type": "private_group", "id": 190000004},
            _chat_messages(rng, text, group_n, 1, senders[:6]),
        )
        out.write(",\n")
        counts["private"] = _write_chat(
            out,
            {"name": "Anna", "type": "personal_chat", "id": 1000000},
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
