"""The user config file (``$CHATSEEK_HOME/config.toml``): written by the gateway, read by all.

Every key is optional; the defaults below are the documented ones. The file and its directory
are private (0600 / 0700) because it may hold the Telegram API hash. ``load`` re-reads the file
when it changed, so a source added from a terminal is seen by a running MCP server.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from chatseek_core.errors import InvalidArgument

__all__ = ["Config", "SearchConfig", "TEMPLATE", "load", "write_template"]

TEMPLATE = """\
# chatseek configuration. Every key is optional; the values shown are the defaults.

[telegram]
# From https://my.telegram.org/apps. Also read from CHATSEEK_TELEGRAM_API_ID / _API_HASH.
# api_id = 123456
# api_hash = "0123456789abcdef0123456789abcdef"

[search]
k = 10                      # hits per search
rrf_k = 60                  # Reciprocal Rank Fusion constant: sum of 1 / (rrf_k + rank)
rerank = true               # re-score the top candidates with the cross-encoder
rerank_top = 40             # how many fused candidates the cross-encoder sees
list_depth = 100            # how deep each ranked list is fetched (at least k and rerank_top)
reaction_weight = 0.05      # w in w * log1p(r) / (1 + log1p(r))
dedup_overlap = 0.5         # drop a hit when this share of its messages is in a better hit
snippet_chars = 600         # snippet length around the anchor message
fusion = "convex"           # "convex": weighted sum of min-max scaled scores; "rrf": weighted RRF
words_weight = 0.6          # weight of the BM25 unit list in fusion
messages_weight = 0.0       # weight of the BM25 message list (run only when above 0)
meaning_weight = 0.4        # weight of the dense list (eval/FUSION.md says how they were chosen)
conversation_words_weight = 0.3    # a unit's conversation chunks by BM25 (convex, built chats)
conversation_meaning_weight = 0.5  # ... and by meaning
exact_words_weight = 0.9    # words' weight (convex) when the question names an exact token:
exact_meaning_weight = 0.1  # a quoted phrase, a number, chart.js, C++, an acronym like ВНЖ
auto_sync_after_min = 60    # the MCP search tool refreshes an index older than this
auto_sync_budget_s = 20     # ... with a sync capped at this many seconds

[media]
enabled = true
ocr = true
documents = true
max_download_mb = 20        # larger files are never downloaded
"""


FUSION_RULES = ("convex", "rrf")


@dataclass(frozen=True)
class SearchConfig:
    """The ``[search]`` table."""

    k: int = 10
    rrf_k: int = 60
    rerank: bool = True
    rerank_top: int = 40
    list_depth: int = 100
    reaction_weight: float = 0.05
    dedup_overlap: float = 0.5
    snippet_chars: int = 600
    fusion: str = "convex"
    words_weight: float = 0.6
    messages_weight: float = 0.0
    meaning_weight: float = 0.4
    conversation_words_weight: float = 0.3
    conversation_meaning_weight: float = 0.5
    exact_words_weight: float = 0.9
    exact_meaning_weight: float = 0.1
    auto_sync_after_min: float = 60.0
    auto_sync_budget_s: float = 20.0


@dataclass(frozen=True)
class Config:
    """The whole file."""

    api_id: int | None = None
    api_hash: str | None = None
    search: SearchConfig = field(default_factory=SearchConfig)
    media: dict[str, Any] = field(default_factory=dict)


def write_template(path: Path) -> Path:
    """Write the annotated template with mode 0600 (directory 0700).

    Raises:
        FileExistsError: the file exists; it is never overwritten.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    path.parent.chmod(0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(TEMPLATE)
    return path


def _search_config(table: dict[str, Any], path: Path) -> SearchConfig:
    known = {f.name: f.type for f in fields(SearchConfig)}
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key not in known:
            raise InvalidArgument(
                f"{path}: unknown key [search] {key}",
                hint=f"known keys: {', '.join(sorted(known))}",
            )
        default = getattr(SearchConfig(), key)
        if key == "fusion":
            if value not in FUSION_RULES:
                raise InvalidArgument(
                    f"{path}: [search] fusion must be one of {', '.join(FUSION_RULES)}",
                    candidates=list(FUSION_RULES),
                )
            values[key] = value
            continue
        if isinstance(default, bool) != isinstance(value, bool) or not isinstance(
            value, int | float
        ):
            raise InvalidArgument(f"{path}: [search] {key} must be like {default!r}")
        values[key] = type(default)(value)
    return SearchConfig(**values)


def load(path: Path) -> Config:
    """Read the config file; a missing file means every default.

    Raises:
        InvalidArgument: the file is not valid TOML or has a bad key; the message names it.
    """
    if not path.exists():
        return Config()
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise InvalidArgument(f"{path} is not valid TOML: {exc}", hint="fix or remove it") from exc
    telegram = data.get("telegram", {})
    api_id = telegram.get("api_id")
    return Config(
        api_id=int(api_id) if api_id is not None else None,
        api_hash=telegram.get("api_hash"),
        search=_search_config(data.get("search", {}), path),
        media=dict(data.get("media", {})),
    )
