"""A gRPC health probe for container healthchecks: ``python -m chatseek_core.probe [ADDR]``.

Exits 0 when the server at ADDR (default ``$CHATSEEK_LISTEN`` with 0.0.0.0 read as 127.0.0.1)
answers SERVING, 1 otherwise. No downloaded binaries: it speaks the standard health protocol
with the grpc package every image already has.
"""

from __future__ import annotations

import os
import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

__all__ = ["check", "main"]

PROBE_TIMEOUT_S = 3.0


def check(addr: str, service: str = "", timeout: float = PROBE_TIMEOUT_S) -> str:
    """The health status name of ``service`` at ``addr``: SERVING, NOT_SERVING, … or DOWN."""
    channel = grpc.insecure_channel(addr)
    try:
        stub = health_pb2_grpc.HealthStub(channel)
        response = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
        return str(health_pb2.HealthCheckResponse.ServingStatus.Name(response.status))
    except grpc.RpcError:
        return "DOWN"
    finally:
        channel.close()


def main(argv: list[str] | None = None) -> int:
    """Probe and return the exit code."""
    args = sys.argv[1:] if argv is None else argv
    addr = args[0] if args else os.environ.get("CHATSEEK_LISTEN", "127.0.0.1:0")
    host, _, port = addr.rpartition(":")
    if host in ("0.0.0.0", "[::]", "::", ""):
        addr = f"127.0.0.1:{port}"
    status = check(addr)
    print(status)
    return 0 if status == "SERVING" else 1


if __name__ == "__main__":
    raise SystemExit(main())
