"""The caller's deadline, carried from an incoming RPC to every downstream call it makes.

The server interceptor records the time remaining on the incoming call; ``timeout_for`` gives a
downstream call the smaller of its own timeout and what is left of the caller's, so a deadline set
at the gateway bounds the whole chain.
"""

from __future__ import annotations

import contextvars
import time

__all__ = ["enter", "leave", "remaining", "share", "timeout_for"]

_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "chatseek_deadline", default=None
)
MIN_TIMEOUT_S = 0.05


def enter(time_remaining: float | None) -> contextvars.Token[float | None]:
    """Record the incoming call's remaining seconds (None: no deadline)."""
    value = None if time_remaining is None else time.monotonic() + time_remaining
    return _deadline.set(value)


def leave(token: contextvars.Token[float | None]) -> None:
    """Forget the deadline recorded by ``enter``."""
    _deadline.reset(token)


def remaining() -> float | None:
    """Seconds left of the caller's deadline, or None when there is none."""
    value = _deadline.get()
    return None if value is None else value - time.monotonic()


def timeout_for(own_timeout: float) -> float:
    """The timeout a downstream call should use: its own, capped by the caller's deadline."""
    left = remaining()
    if left is None:
        return own_timeout
    return max(MIN_TIMEOUT_S, min(own_timeout, left))


def share(own_timeout: float, fraction: float) -> float:
    """A timeout for an optional step: at most ``fraction`` of what is left of the deadline.

    A step whose failure only degrades the answer (the dense list, the reranker) must leave time
    for the answer itself, so it may not use the whole deadline.
    """
    left = remaining()
    if left is None:
        return own_timeout
    return max(MIN_TIMEOUT_S, min(own_timeout, left * fraction))
