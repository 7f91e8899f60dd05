"""``chatseek mcp``: the MCP server over stdio, where stdout carries nothing but the protocol.

Before serving, the protocol takes private duplicates of fds 0 and 1; fd 1 is then pointed at
stderr (so a child process or C library that writes to it cannot corrupt the wire), fd 0 at the
null device, and ``sys.stdout`` is replaced by ``StdoutGuard``, which refuses every write with an
error that names the culprit. Logging goes to stderr. The gateway is reached over gRPC; the
local stack is started on the first tool call when no gateway answers.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
from collections.abc import Callable, Iterator
from typing import BinaryIO

import anyio

from chatseek_core.log import setup_logging
from chatseek_core.settings import Settings
from chatseek_gateway.mcp.gateway import GatewayConnection
from chatseek_gateway.mcp.server import build_server

__all__ = ["StdoutGuard", "StdoutWriteError", "guarded_stdio", "serve_stdio"]

log = logging.getLogger(__name__)

SERVICE_NAME = "mcp"
STDIN_FD = 0
STDOUT_FD = 1
STDERR_FD = 2


class StdoutWriteError(RuntimeError):
    """Something wrote to ``sys.stdout`` while stdout carries the MCP protocol (a bug)."""


class StdoutGuard(io.TextIOBase):
    """Stands in for ``sys.stdout`` while serving: any write fails loudly.

    The write is refused with ``StdoutWriteError`` (so the caller's traceback shows where it came
    from) and logged at ERROR on stderr; the protocol stream is never touched.
    """

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not text:
            return 0
        log.error("refused a write of %d characters to stdout (MCP protocol only)", len(text))
        raise StdoutWriteError(
            "stdout carries the MCP protocol; write diagnostics to stderr or use logging"
        )

    def flush(self) -> None:
        return None

    def isatty(self) -> bool:
        return False


@contextlib.contextmanager
def guarded_stdio() -> Iterator[tuple[BinaryIO, BinaryIO]]:
    """Claim stdin/stdout for the protocol; yields ``(wire_in, wire_out)`` binary files.

    While inside: fd 1 writes land on stderr, fd 0 reads EOF, ``sys.stdout`` is a
    ``StdoutGuard``. The descriptors and ``sys.stdout`` are restored on exit.
    """
    sys.stdout.flush()
    # The wire descriptors belong to the files handed out (their text wrappers may close them);
    # separate duplicates put fds 0 and 1 back on exit.
    saved_in_fd = os.dup(STDIN_FD)
    saved_out_fd = os.dup(STDOUT_FD)
    wire_in_fd = os.dup(STDIN_FD)
    wire_out_fd = os.dup(STDOUT_FD)
    saved_stdout = sys.stdout
    devnull = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(devnull, STDIN_FD)
    finally:
        os.close(devnull)
    os.dup2(STDERR_FD, STDOUT_FD)
    sys.stdout = StdoutGuard()
    # A reader thread may still block on the wire after an abnormal exit: its descriptor is never
    # closed (so never recycled under it); the process ends right after serving anyway.
    wire_in = os.fdopen(wire_in_fd, "rb", closefd=False)
    wire_out = os.fdopen(wire_out_fd, "wb")
    try:
        yield wire_in, wire_out
    finally:
        sys.stdout = saved_stdout
        with contextlib.suppress(OSError, ValueError):
            wire_out.flush()
        wire_out.close()
        wire_in.close()
        os.dup2(saved_out_fd, STDOUT_FD)
        os.dup2(saved_in_fd, STDIN_FD)
        os.close(saved_out_fd)
        os.close(saved_in_fd)


async def _serve(
    settings: Settings,
    ensure: Callable[[], None] | None,
    account: str,
    wire: tuple[BinaryIO, BinaryIO],
) -> None:
    from mcp.server.stdio import stdio_server

    wire_in, wire_out = wire
    gateway = GatewayConnection(settings.addr("gateway"), ensure=ensure, account=account)
    server = build_server(gateway, settings.config_path)
    lowlevel = server._lowlevel_server  # the SDK's own in-memory client reaches it the same way
    stdin = anyio.wrap_file(io.TextIOWrapper(wire_in, encoding="utf-8", errors="replace"))
    stdout = anyio.wrap_file(io.TextIOWrapper(wire_out, encoding="utf-8"))
    try:
        async with stdio_server(stdin=stdin, stdout=stdout) as (read_stream, write_stream):
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
    finally:
        await gateway.close()


def serve_stdio(
    settings: Settings,
    *,
    ensure: Callable[[], None] | None = None,
    account: str = "",
    verbose: bool = False,
) -> int:
    """Serve MCP on this process's stdin/stdout until the client closes stdin.

    Args:
        settings: where the gateway is and where the config file lives.
        ensure: blocking hook run before the first gateway call (start the stack).
        account: the account a tool call acts for when it names none ("": the stack's active
            account).
        verbose: log at DEBUG (still on stderr).

    Returns:
        The process exit code (0 when the client hung up).
    """
    setup_logging(
        service=SERVICE_NAME,
        level="DEBUG" if verbose else settings.log_level,
        fmt="text" if settings.log_format == "auto" else settings.log_format,
    )
    log.info("serving MCP over stdio; gateway at %s", settings.addr("gateway"))
    with guarded_stdio() as wire:
        anyio.run(_serve, settings, ensure, account, wire)
    log.info("stdin closed; MCP over stdio stopped")
    return 0
