"""The ranked lists and the reranker, fetched from the lexical, vector and embed services."""

from __future__ import annotations

from collections.abc import Sequence

from chatseek.common.v1 import common_pb2
from chatseek.embed.v1 import embed_service_pb2, embed_service_pb2_grpc
from chatseek.lexical.v1 import lexical_service_pb2, lexical_service_pb2_grpc
from chatseek.vector.v1 import vector_service_pb2, vector_service_pb2_grpc
from chatseek_core import deadline
from chatseek_core.client import aio_channel, call
from chatseek_core.settings import Settings
from chatseek_fusion.hybrid import ListFilter, Neighbours

__all__ = ["GrpcSignals"]

LIST_TIMEOUT_S = 10.0
KNN_TIMEOUT_S = 15.0
RERANK_TIMEOUT_S = 30.0
# The dense list and the reranker only improve an answer: each may use this share of what is
# left of the caller's deadline, so a slow embed degrades search instead of timing it out.
DENSE_SHARE = 0.5
RERANK_SHARE = 0.5


def _lexical_filter(flt: ListFilter) -> lexical_service_pb2.ListFilter:
    return lexical_service_pb2.ListFilter(
        accounts=list(flt.accounts),
        chat_ids=list(flt.chat_ids),
        range=common_pb2.TimeRange(since=flt.since, until=flt.until),
        kinds=list(flt.kinds),
    )


class GrpcSignals:
    """``Signals`` over gRPC stubs of lexical, vector and embed."""

    def __init__(self, settings: Settings) -> None:
        self._channels = [
            aio_channel(settings.addr(name)) for name in ("lexical", "vector", "embed")
        ]
        self.lexical = lexical_service_pb2_grpc.LexicalServiceStub(self._channels[0])
        self.vector = vector_service_pb2_grpc.VectorServiceStub(self._channels[1])
        self.embed = embed_service_pb2_grpc.EmbedServiceStub(self._channels[2])

    async def close(self) -> None:
        """Close the channels."""
        for channel in self._channels:
            await channel.close()

    async def words(self, query: str, flt: ListFilter, limit: int) -> list[tuple[int, float, int]]:
        reply = await call(
            self.lexical.UnitList,
            lexical_service_pb2.UnitListRequest(
                query=query, filter=_lexical_filter(flt), limit=limit
            ),
            timeout=LIST_TIMEOUT_S,
            idempotent=True,
            peer="lexical",
        )
        return [(u.unit_id, u.score, u.best_msg_id) for u in reply.units]

    async def messages(
        self, query: str, flt: ListFilter, limit: int
    ) -> list[tuple[int, float, int]]:
        reply = await call(
            self.lexical.MessageList,
            lexical_service_pb2.MessageListRequest(
                query=query, filter=_lexical_filter(flt), limit=limit
            ),
            timeout=LIST_TIMEOUT_S,
            idempotent=True,
            peer="lexical",
        )
        return [(u.unit_id, u.score, u.best_msg_id) for u in reply.units]

    async def chunks(
        self, query: str, flt: ListFilter, limit: int, any_word: bool
    ) -> list[tuple[int, float, int]]:
        """Conversation chunks of current builds by BM25."""
        reply = await call(
            self.lexical.ChunkList,
            lexical_service_pb2.ChunkListRequest(
                query=query, filter=_lexical_filter(flt), limit=limit, any_word=any_word
            ),
            timeout=LIST_TIMEOUT_S,
            idempotent=True,
            peer="lexical",
        )
        return [(u.unit_id, u.score, u.best_msg_id) for u in reply.units]

    async def meaning(
        self, query: str, flt: ListFilter, limit: int, *, current_chunks_only: bool = False
    ) -> Neighbours:
        reply = await call(
            self.vector.Knn,
            vector_service_pb2.KnnRequest(
                query=query,
                accounts=list(flt.accounts),
                chat_ids=list(flt.chat_ids),
                range=common_pb2.TimeRange(since=flt.since, until=flt.until),
                kinds=list(flt.kinds),
                k=limit,
                current_chunks_only=current_chunks_only,
            ),
            timeout=deadline.share(KNN_TIMEOUT_S, DENSE_SHARE),
            idempotent=True,
            peer="vector",
        )
        return Neighbours(
            units=[(n.unit_id, n.cosine) for n in reply.neighbours],
            warnings=[{"code": w.code, "message": w.message} for w in reply.warnings],
            embedded_only_elsewhere=list(reply.embedded_only_elsewhere),
        )

    async def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        reply = await call(
            self.embed.Rerank,
            embed_service_pb2.RerankRequest(query=query, texts=list(texts)),
            timeout=deadline.share(RERANK_TIMEOUT_S, RERANK_SHARE),
            idempotent=True,
            peer="embed",
        )
        return list(reply.scores)
