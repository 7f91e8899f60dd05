"""Messages of a Telegram Desktop export, as its ``result.json`` writes them, for tests that
write big exports of their own (``json.dumps`` each one into the file)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

__all__ = ["export_message"]


def export_message(
    msg_id: int, text: str, *, unix: int, sender: int, **extra: Any
) -> dict[str, Any]:
    """A plain text message by user ``sender`` (named ``User <sender>``) at ``unix``.

    ``extra`` adds or overrides fields, e.g. ``reply_to_message_id`` or ``edited``.
    """
    return {
        "id": msg_id,
        "type": "message",
        "date": datetime.fromtimestamp(unix, UTC).strftime("%Y-%m-%dT%H:%M:%S"),
        "date_unixtime": str(unix),
        "from": f"User {sender}",
        "from_id": f"user{sender}",
        "text": text,
        "text_entities": [{"type": "plain", "text": text}],
        **extra,
    }
