"""The vector service starts alone on port 0 over a temp data dir and reports SERVING; its entry
point runs numpy on one BLAS thread."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from chatseek_testing.services import serving, temp_settings
from chatseek_vector.server import create_server, open_deps


async def test_the_service_serves_health_after_start_and_creates_its_database(
    tmp_path: Path,
) -> None:
    settings = temp_settings(tmp_path, "vector")
    running = create_server(settings, open_deps(settings))
    async with serving(running) as addr:
        async with grpc.aio.insecure_channel(addr) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            reply = await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
            named = await stub.Check(
                health_pb2.HealthCheckRequest(service="chatseek.vector.v1.VectorService"), timeout=5
            )
            assert named.status == health_pb2.HealthCheckResponse.SERVING
    assert (tmp_path / "data" / "vector.db").exists()


def _blas_threads(env: dict[str, str]) -> int:
    """OpenBLAS's thread count in a fresh process that loaded the service's entry point."""
    probe = (
        "import chatseek_vector.__main__, threadpoolctl;"
        "print(max(p['num_threads'] for p in threadpoolctl.threadpool_info()"
        " if p['internal_api'] == 'openblas'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    return int(done.stdout.strip())


def test_the_entry_point_runs_numpy_on_one_blas_thread_unless_told_otherwise() -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    assert _blas_threads(env) == 1
    assert _blas_threads({**env, "OPENBLAS_NUM_THREADS": "2"}) == 2
