"""chatseek ingest service: Telegram Desktop import, Telegram sync, media text."""
