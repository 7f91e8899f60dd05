"""Conversions between JSON-shaped Python values and the ``Document``/``Struct`` messages.

Only for the RPCs not typed yet; typed results go through ``chatseek_core.wire_json``.

``Struct`` numbers are doubles; every integer we send (marked chat ids, message ids, unix
seconds) is below 2**53, so ``to_python`` turns integral doubles back into ints exactly.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from google.protobuf import json_format, struct_pb2

from chatseek.common.v1 import common_pb2

__all__ = ["document", "from_document", "operation_progress", "operation_result", "to_python"]


def _clean(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def document(body: Mapping[str, Any]) -> common_pb2.Document:
    """Pack a JSON-shaped mapping into a ``Document``."""
    struct = struct_pb2.Struct()
    struct.update(_clean(body))
    return common_pb2.Document(body=struct)


def to_python(value: Any) -> Any:
    """Undo ``Struct``'s number widening: integral floats become ints, recursively."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: to_python(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_python(v) for v in value]
    return value


def from_document(doc: common_pb2.Document) -> dict[str, Any]:
    """The mapping a ``Document`` carries, with integers restored."""
    raw = json_format.MessageToDict(doc.body)
    result = to_python(raw)
    assert isinstance(result, dict)
    return result


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


def operation_result(body: Mapping[str, Any]) -> common_pb2.OperationEvent:
    """An ``OperationEvent`` carrying the final report."""
    return common_pb2.OperationEvent(result=document(body))
