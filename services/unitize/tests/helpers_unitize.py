"""Real ``ingest.db`` + ``unitize.db`` pairs for unitize tests, written through ingest's store."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from chatseek_core import db, feed
from chatseek_ingest import store as ingest_store
from chatseek_ingest.model import ExportChat, ExportMedia, ExportMessage
from chatseek_ingest.schema import MIGRATIONS as INGEST_MIGRATIONS
from chatseek_ingest.schema import OWNER as INGEST_OWNER
from chatseek_unitize.model import content_hash
from chatseek_unitize.schema import MIGRATIONS, OWNER
from chatseek_unitize.units import apply_ingest_feed

ACCOUNT = "default"
GROUP = -1001000000001
CHANNEL = -1001000000002
DISCUSSION = -1001000000003
BASE = 1_767_225_600  # 2026-01-01T00:00:00Z
MINUTE = 60


@dataclass
class Stores:
    """An ingest.db written like ingest writes it, and a unitize.db that attaches it."""

    root: Path
    ingest: db.Connection
    unitize: db.Connection
    messages: dict[tuple[int, int], ExportMessage] = field(default_factory=dict)

    def chat(self, chat_id: int, kind: str = "supergroup", title: str = "Chat") -> None:
        """Create (or update) a chat."""
        with db.transaction(self.ingest):
            ingest_store.ensure_account(self.ingest, ACCOUNT)
            ingest_store.upsert_chat(
                self.ingest,
                ACCOUNT,
                ExportChat(
                    chat_id=chat_id,
                    raw_id=abs(chat_id),
                    type=kind,
                    title=title,
                    username=None,
                    export_type=kind,
                ),
                source_id=None,
                is_import=False,
            )

    def channel(self, title: str) -> None:
        """Create ``CHANNEL`` with ``DISCUSSION`` as its linked discussion group."""
        self.chat(CHANNEL, kind="channel", title=title)
        self.chat(DISCUSSION, kind="supergroup", title=f"{title} chat")
        self.link_discussion(CHANNEL, DISCUSSION)

    def link_discussion(self, channel: int, group: int) -> None:
        """Set a channel's discussion group, as a Telegram sync records it."""
        with db.transaction(self.ingest):
            self.ingest.execute(
                "UPDATE chats SET linked_chat_id = ? WHERE account = ? AND chat_id = ?",
                (group, ACCOUNT, channel),
            )

    def put(self, messages: Iterable[ExportMessage]) -> None:
        """Store (insert or edit) messages; ingest announces each real change on its feed."""
        batch = list(messages)
        with db.transaction(self.ingest):
            ingest_store.store_messages(self.ingest, ACCOUNT, batch)
        for m in batch:
            self.messages[(m.chat_id, m.msg_id)] = m

    def edit(self, chat_id: int, msg_id: int, **changes: Any) -> None:
        """Edit one stored message."""
        self.put([replace(self.messages[(chat_id, msg_id)], **changes)])

    def comment(self, group: int, msg_id: int, channel: int, post: int) -> None:
        """Mark a discussion-group message as a comment on a channel post."""
        with db.transaction(self.ingest):
            self.ingest.execute(
                "UPDATE messages SET comment_channel_id = ?, comment_post_id = ?"
                " WHERE account = ? AND chat_id = ? AND msg_id = ?",
                (channel, post, ACCOUNT, group, msg_id),
            )
            feed.append(self.ingest, [("message", ACCOUNT, group, msg_id, "upsert")])

    def delete(self, chat_id: int, msg_ids: Sequence[int]) -> None:
        """Delete messages; ingest announces each deletion."""
        with db.transaction(self.ingest):
            ingest_store.delete_messages(self.ingest, ACCOUNT, chat_id, msg_ids)

    def extracted(self, chat_id: int, msg_id: int, text: str) -> None:
        """Record text read out of a message's media, as the extractor does."""
        row = self.ingest.execute(
            "SELECT mid FROM messages WHERE account = ? AND chat_id = ? AND msg_id = ?",
            (ACCOUNT, chat_id, msg_id),
        ).fetchone()
        with db.transaction(self.ingest):
            ingest_store.set_extracted(self.ingest, int(row[0]), "read", text)

    def drain(self, batch: int = 1000) -> int:
        """Apply the ingest feed until it is consumed; returns the events applied."""
        total = 0
        while True:
            done = apply_ingest_feed(self.unitize, batch=batch)
            total += done
            if not done:
                return total

    def units(self, chat_id: int = GROUP) -> dict[str, dict[str, Any]]:
        """Stored units of a chat (conversation chunks excluded) by key."""
        rows = db.rows(
            self.unitize,
            "SELECT unit_id, kind, key, msg_ids, text, content_hash, reactions FROM units"
            " WHERE account = ? AND chat_id = ? AND kind != 'conversation'",
            (ACCOUNT, chat_id),
        )
        return {str(r["key"]): r for r in rows}

    def unit_events(self, after: int = 0) -> list[tuple[int, str]]:
        """``(unit_id, op)`` of the unit feed after ``after``."""
        return [
            (e.entity, e.op)
            for e in feed.read_after(self.unitize, after, 1_000_000)
            if e.kind == "unit"
        ]

    def age(self) -> None:
        """Mark every unit and chat as cut by recipe 0, as an older release left them."""
        with db.transaction(self.unitize):
            for unit_id, text in self.unitize.execute("SELECT unit_id, text FROM units").fetchall():
                self.unitize.execute(
                    "UPDATE units SET recipe = 0, content_hash = ? WHERE unit_id = ?",
                    (content_hash(0, text), unit_id),
                )
            self.unitize.execute("UPDATE chat_recipes SET recipe = 0")

    def feed_head(self) -> int:
        """The unitize feed's newest sequence number."""
        return feed.head(self.unitize)

    def close(self) -> None:
        """Close both connections."""
        self.unitize.close()
        self.ingest.close()


def make_stores(root: Path) -> Stores:
    """Fresh, migrated ingest.db and unitize.db under ``root`` (the unitize one attaches ingest)."""
    root.mkdir(parents=True, exist_ok=True)
    ingest = db.connect(root / "ingest.db")
    db.migrate(ingest, INGEST_OWNER, INGEST_MIGRATIONS)
    unitize = db.connect(root / "unitize.db")
    db.migrate(unitize, OWNER, MIGRATIONS)
    db.attach_readonly(unitize, root / "ingest.db", "ingest")
    return Stores(root=root, ingest=ingest, unitize=unitize)


def msg(
    msg_id: int,
    minute: int,
    text: str = "",
    *,
    chat_id: int = GROUP,
    sender: int = 1,
    reply_to: int | None = None,
    topic: int | None = None,
    media: str | None = None,
    file_name: str | None = None,
    service: bool = False,
    reactions: int = 0,
) -> ExportMessage:
    """A message ``minute`` minutes after ``BASE`` from sender ``sender`` (named ``User<n>``)."""
    return ExportMessage(
        chat_id=chat_id,
        msg_id=msg_id,
        date=BASE + minute * MINUTE,
        kind="service" if service else "message",
        sender_id=sender,
        sender_kind="user",
        sender_name=f"User{sender}",
        text=text if text or media or service else f"message {msg_id}",
        reply_to_msg_id=reply_to,
        topic_id=topic,
        media=ExportMedia(kind=media, file_name=file_name) if media else None,
        reactions_total=reactions,
        service_action="pin_message" if service else None,
    )
