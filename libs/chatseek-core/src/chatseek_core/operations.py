"""The events of a streamed long-running operation: progress, then a typed final report.

A report is a member of ``common.v1.OperationEvent`` (``VerifyReport``, ``ImportReport``, …),
set by the service that ran the operation; progress events are built here, the same for all.
"""

from __future__ import annotations

from chatseek.common.v1 import common_pb2

__all__ = ["operation_progress"]


def operation_progress(
    stage: str,
    done: int,
    total: int = 0,
    note: str = "",
    *,
    item: str = "",
    item_done: int = 0,
    count: int = 0,
    wait_s: float = 0.0,
    account: str = "",
) -> common_pb2.OperationEvent:
    """An ``OperationEvent`` carrying progress (see ``common.v1.Progress`` for the fields)."""
    return common_pb2.OperationEvent(
        progress=common_pb2.Progress(
            stage=stage,
            done=done,
            total=total,
            note=note,
            item=item,
            item_done=item_done,
            count=count,
            wait_s=wait_s,
            account=account,
        )
    )
