"""Reading text out of the media of a just-imported export."""

from __future__ import annotations

from pathlib import Path

from chatseek_core import db
from chatseek_ingest.extract import Limits, Scope, export_fetcher, extract_pending

__all__ = ["read_export_media"]


def read_export_media(
    conn: db.Connection, root: Path, account: str, chat_ids: list[int]
) -> dict[str, int]:
    """Read the text of media files included in a just-imported export, right away.

    Only rows of the imported chats whose file is inside the export folder are read; others stay
    pending for ``chatseek extract``. Returns counts per resulting state.
    """
    scope = Scope(account, tuple(chat_ids))
    report = extract_pending(
        conn, fetch=export_fetcher(root), limits=Limits(), scope=scope, downloads=False
    )
    return dict(report.counts)
