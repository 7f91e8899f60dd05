"""The MCP server as a streamable HTTP endpoint (``/mcp``) served inside the gateway process.

Off unless ``CHATSEEK_MCP_HTTP_LISTEN``, ``CHATSEEK_MCP_TOKEN`` or ``CHATSEEK_MCP_LOOPBACK_ONLY``
is set; it listens on loopback by default. Every request must carry
``Authorization: Bearer <CHATSEEK_MCP_TOKEN>``, compared in constant time; anything else gets 401.
Without a token it refuses to start, unless ``CHATSEEK_MCP_LOOPBACK_ONLY=1`` and the listen
address is loopback. The refusal and the socket bind happen in ``open_http``, before serving, so
a misconfigured gateway fails at startup. Signals stay with the host process; cancelling the
serving task shuts the endpoint down gracefully. Tokens are never logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import logging
import socket
from collections.abc import Callable, Coroutine, Iterator
from typing import TYPE_CHECKING, Any

from chatseek_core.errors import FailedPrecondition, InvalidArgument
from chatseek_core.settings import Settings
from chatseek_gateway.mcp.gateway import GatewayConnection

if TYPE_CHECKING:
    import uvicorn
    from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = [
    "MCP_PATH",
    "BearerAuth",
    "HttpEndpoint",
    "check_http",
    "http_enabled",
    "http_jobs",
    "open_http",
    "serve_http",
]

log = logging.getLogger(__name__)

MCP_PATH = "/mcp"
LOOPBACK = "127.0.0.1"
MIN_TOKEN_CHARS = 16
GRACEFUL_SHUTDOWN_S = 5.0
HTTP_UNAUTHORIZED = 401
ENABLING_VARIABLES = ("CHATSEEK_MCP_HTTP_LISTEN", "CHATSEEK_MCP_TOKEN")
TOKEN_HINT = (
    "set CHATSEEK_MCP_TOKEN to a long random string, e.g. the output of "
    "`python3 -c 'import secrets; print(secrets.token_urlsafe(32))'`"
)


def http_enabled(settings: Settings) -> bool:
    """Whether the gateway serves MCP over HTTP: a listen address, a token or loopback-only."""
    return settings.mcp_loopback_only or any(settings.extra.get(n) for n in ENABLING_VARIABLES)


def _split_listen(listen: str) -> tuple[str, int]:
    host, _, port = listen.rpartition(":")
    return host.strip("[]"), int(port)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_http(settings: Settings) -> tuple[str, int]:
    """Validate the endpoint's settings; returns the ``(host, port)`` to listen on.

    Raises:
        FailedPrecondition: no token (and not a loopback-only endpoint), or a token too short to
            be a secret.
        InvalidArgument: ``CHATSEEK_MCP_LOOPBACK_ONLY=1`` with a non-loopback listen address.
    """
    host, port = _split_listen(settings.mcp_http_listen)
    loopback = _is_loopback(host)
    if settings.mcp_loopback_only and not loopback:
        raise InvalidArgument(
            f"CHATSEEK_MCP_LOOPBACK_ONLY=1 but CHATSEEK_MCP_HTTP_LISTEN={settings.mcp_http_listen} "
            "is not a loopback address",
            hint="listen on 127.0.0.1 or ::1, or unset CHATSEEK_MCP_LOOPBACK_ONLY and set a token",
            metadata={"variable": "CHATSEEK_MCP_HTTP_LISTEN"},
        )
    token = settings.mcp_token
    if not token:
        if settings.mcp_loopback_only and loopback:
            return host, port
        raise FailedPrecondition(
            "the MCP HTTP endpoint refuses to start without CHATSEEK_MCP_TOKEN",
            hint=TOKEN_HINT + "; or, for a loopback-only endpoint without a token, set "
            "CHATSEEK_MCP_LOOPBACK_ONLY=1",
            metadata={"variable": "CHATSEEK_MCP_TOKEN"},
        )
    if len(token) < MIN_TOKEN_CHARS:
        raise FailedPrecondition(
            f"CHATSEEK_MCP_TOKEN is shorter than {MIN_TOKEN_CHARS} characters",
            hint=TOKEN_HINT,
            metadata={"variable": "CHATSEEK_MCP_TOKEN"},
        )
    return host, port


class BearerAuth:
    """ASGI middleware: HTTP requests need ``Authorization: Bearer <token>`` (constant time).

    Args:
        app: the wrapped ASGI application.
        token: the expected token; None lets every request through (loopback-only mode).
    """

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self._app = app
        self._token = token.encode() if token else None

    def _authorized(self, scope: Scope) -> bool:
        if self._token is None:
            return True
        presented = b""
        for name, value in scope.get("headers", []):
            if name.lower() == b"authorization":
                scheme, _, credentials = bytes(value).partition(b" ")
                if scheme.lower() == b"bearer":
                    presented = credentials.strip()
                break
        return hmac.compare_digest(presented, self._token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or self._authorized(scope):
            await self._app(scope, receive, send)
            return
        client = scope.get("client") or ("?", 0)
        log.warning("MCP HTTP request without a valid bearer token from %s refused", client[0])
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        from starlette.responses import JSONResponse

        response = JSONResponse(
            {
                "error": "missing or wrong bearer token",
                "reason": "UNAUTHENTICATED",
                "hint": "send Authorization: Bearer <CHATSEEK_MCP_TOKEN>",
            },
            status_code=HTTP_UNAUTHORIZED,
            headers={"WWW-Authenticate": 'Bearer realm="chatseek"'},
        )
        await response(scope, receive, send)


def _uvicorn_server(app: ASGIApp) -> uvicorn.Server:
    import uvicorn

    class _EmbeddedServer(uvicorn.Server):
        """A uvicorn server that leaves signal handling to the process it runs in."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    config = uvicorn.Config(
        app,
        log_config=None,
        access_log=False,
        lifespan="on",
        ws="none",
        timeout_graceful_shutdown=int(GRACEFUL_SHUTDOWN_S),
    )
    return _EmbeddedServer(config)


class HttpEndpoint:
    """A bound, not yet serving MCP HTTP endpoint (see ``open_http``).

    Attributes:
        host: the listen host.
        port: the bound port (the real one when the settings asked for port 0).
    """

    def __init__(self, sock: socket.socket, app: ASGIApp, gateway: GatewayConnection) -> None:
        self._socket = sock
        self._app = app
        self._gateway = gateway
        address = sock.getsockname()
        self.host: str = address[0]
        self.port: int = address[1]

    @property
    def url(self) -> str:
        """The endpoint's URL."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{MCP_PATH}"

    async def serve(self) -> None:
        """Serve until cancelled; a cancel shuts down gracefully, then propagates."""
        server = _uvicorn_server(self._app)
        log.info("serving MCP over HTTP on %s:%d%s", self.host, self.port, MCP_PATH)
        task = asyncio.ensure_future(server.serve(sockets=[self._socket]))
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            server.should_exit = True
            await task
            raise
        finally:
            await self._gateway.close()
            self._socket.close()
            log.info("MCP over HTTP stopped")


def open_http(settings: Settings, *, gateway_addr: str | None = None) -> HttpEndpoint:
    """Check the settings, bind the listen socket and build the app; serving starts later.

    Args:
        settings: the token, listen address and loopback-only flag; the config file path.
        gateway_addr: where the tools reach the gateway (default ``settings.addr("gateway")``;
            the gateway process passes its own loopback address).

    Raises:
        FailedPrecondition, InvalidArgument: see ``check_http``.
        OSError: the listen address cannot be bound.
    """
    from chatseek_gateway.mcp.server import build_server

    host, port = check_http(settings)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.create_server((host, port), family=family)
    gateway = GatewayConnection(gateway_addr or settings.addr("gateway"))
    server = build_server(gateway, settings.config_path)
    app = server.streamable_http_app(streamable_http_path=MCP_PATH, host=host)
    return HttpEndpoint(sock, BearerAuth(app, settings.mcp_token or None), gateway)


def serve_http(settings: Settings, *, gateway_addr: str | None = None) -> Coroutine[Any, Any, None]:
    """The serving coroutine of the MCP HTTP endpoint; checks and binds before returning it.

    Raises:
        FailedPrecondition, InvalidArgument: see ``check_http`` (raised here, not when awaited).
        OSError: the listen address cannot be bound.
    """
    return open_http(settings, gateway_addr=gateway_addr).serve()


def http_jobs(
    settings: Settings, gateway_port: int
) -> list[Callable[[], Coroutine[Any, Any, None]]]:
    """The gateway process's background jobs for MCP over HTTP (``Running.background``).

    Empty when the endpoint is off (see ``http_enabled``); otherwise one job serving it, checked
    and bound now so a misconfiguration stops the gateway at startup. The tools reach the
    gateway on loopback at ``gateway_port``.

    Raises:
        FailedPrecondition, InvalidArgument: see ``check_http``.
        OSError: the listen address cannot be bound.
    """
    if not http_enabled(settings):
        return []
    serving = serve_http(settings, gateway_addr=f"{LOOPBACK}:{gateway_port}")
    return [lambda: serving]
