"""Reading text out of the media of a just-imported export."""

from __future__ import annotations

from pathlib import Path

from chatseek_core import db
from chatseek_ingest.extract import Limits, MediaRow, export_fetcher, extract_pending

__all__ = ["read_export_media"]


def read_export_media(conn: db.Connection, root: Path, chat_ids: list[int]) -> dict[str, int]:
    """Read the text of media files included in a just-imported export, right away.

    Only rows of the imported chats whose file is inside the export folder are read; others stay
    pending for ``chatseek extract``. Returns counts per resulting state.
    """
    inside = export_fetcher(root)
    wanted = set(chat_ids)

    def fetch(row: MediaRow, tmp: Path) -> Path | None:
        if row.chat_id not in wanted or not row.extra.get("export_path"):
            return None
        return inside(row, tmp)

    report = extract_pending(conn, fetch=fetch, limits=Limits())
    return dict(report.counts)
