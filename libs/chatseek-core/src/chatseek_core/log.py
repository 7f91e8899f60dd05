"""Logging: the one ``setup_logging`` every process calls, and ``redact`` for message text.

JSON lines on stderr in containers (or when ``CHATSEEK_LOG_FORMAT=json``), plain text on a
terminal, and a rotated file under ``$CHATSEEK_HOME/logs`` for the local stack. Noisy libraries
are capped at WARNING. Message text never appears above DEBUG: log ``redact(text)`` instead.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import sys
import time
from pathlib import Path

from chatseek_core.text import redact_digest

__all__ = ["redact", "setup_logging"]

LOG_FILE_BYTES = 10 * 1024 * 1024
LOG_FILE_BACKUPS = 3
NOISY_LOGGERS = (
    "grpc",
    "asyncio",
    "httpx",
    "httpcore",
    "urllib3",
    "filelock",
    "huggingface_hub",
    "sentence_transformers",
    "transformers",
    "telethon",
    "mcp",
    "sse_starlette",
    "uvicorn",
)


def redact(text: str) -> str:
    """How message text is written to logs above DEBUG: ``<N chars #digest>``."""
    return redact_digest(text)


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


def setup_logging(
    *,
    service: str,
    level: str = "INFO",
    fmt: str = "auto",
    log_dir: Path | None = None,
) -> None:
    """Configure the root logger once for this process.

    Args:
        service: the process name, written into every text line.
        level: the root level name.
        fmt: ``json``, ``text`` or ``auto`` (text on a terminal, JSON otherwise).
        log_dir: when given, also write a rotated ``<service>.log`` there.
    """
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    use_json = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty() and log_dir is None)
    text_format = logging.Formatter(
        f"%(asctime)s {service} %(levelname)s %(name)s: %(message)s", "%Y-%m-%d %H:%M:%S"
    )
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setFormatter(_JsonFormatter() if use_json else text_format)
    root.addHandler(stderr)
    if log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True)
        log_dir.chmod(0o700)
        rotating = logging.handlers.RotatingFileHandler(
            log_dir / f"{service}.log", maxBytes=LOG_FILE_BYTES, backupCount=LOG_FILE_BACKUPS
        )
        rotating.setFormatter(text_format)
        root.addHandler(rotating)
    root.setLevel(level)
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(max(logging.WARNING, root.level))
