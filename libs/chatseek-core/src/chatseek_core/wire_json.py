"""Typed result messages → the JSON the CLI ``--json`` and the MCP tools print; the edge's enums.

JSON is made once, here, at the edge. A small descriptor walker, not ``json_format``:
``MessageToDict`` writes int64 as strings, drops unset and default fields and has no null, so
it would need a second, descriptor-guided pass to undo all three; walking the descriptor once
is shorter and says the rules in one place:
* keys are the proto field names, in declaration order; maps keep their keys;
* int64 stays an int, double stays a float (1.0 is written 1.0, never 1);
* an enum is its value name without the enum's prefix, lower case (``CHAT_KIND_FORUM`` →
  ``"forum"``); the ``_UNSPECIFIED`` value is null;
* an unset ``optional`` or message field is null, and a field marked
  ``[(chatseek.common.v1.omit_empty) = true]`` is left out when unset, empty or the default;
* a ``oneof`` is one key, its own name, at its first member's place: the set member's value,
  null when none is set (read back through the first member whose type takes the value: an
  object, the first message with a field for each of its keys);
* a ``oneof`` marked ``option (chatseek.common.v1.tagged) = true`` is flat: its key holds the
  set member's field name, and that member message's fields follow in the parent's own object
  (``{"action": "answer", "chat_id": 1, "stored": 1, "rejected": []}``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypeVar

from google.protobuf.descriptor import EnumDescriptor, FieldDescriptor
from google.protobuf.message import Message

from chatseek.common.v1 import common_pb2
from chatseek_core.errors import InvalidArgument

__all__ = [
    "SEARCH_MODE_NAMES",
    "SOURCE_NAMES",
    "answer_json",
    "event_report",
    "from_json",
    "mode_word",
    "parse_mode",
    "parse_source",
    "to_json",
]

M = TypeVar("M", bound=Message)
E = TypeVar("E", bound=int)
# The stubs type a field as the pure-Python or the upb descriptor class; both answer alike.
_Field = Any

# The edge's one vocabulary: "telegram" (the CLI's old word) is the active account.
SOURCE_NAMES: dict[str, common_pb2.Source.ValueType] = {
    "": common_pb2.SOURCE_ACTIVE,
    "active": common_pb2.SOURCE_ACTIVE,
    "telegram": common_pb2.SOURCE_ACTIVE,
    "all": common_pb2.SOURCE_ALL,
}
SEARCH_MODE_NAMES: dict[str, common_pb2.SearchMode.ValueType] = {
    "": common_pb2.SEARCH_MODE_HYBRID,
    "hybrid": common_pb2.SEARCH_MODE_HYBRID,
    "lexical": common_pb2.SEARCH_MODE_LEXICAL,
    "dense": common_pb2.SEARCH_MODE_DENSE,
}

# The field, or oneof, a unary reply answers in.
_RESULT = "result"
_prefixes: dict[str, str] = {}
_INT_TYPES = frozenset(
    {
        FieldDescriptor.CPPTYPE_INT32,
        FieldDescriptor.CPPTYPE_INT64,
        FieldDescriptor.CPPTYPE_UINT32,
        FieldDescriptor.CPPTYPE_UINT64,
    }
)


def _parse(field: str, value: str, names: Mapping[str, E]) -> E:
    found = names.get(value.strip().lower())
    if found is None:
        words = ", ".join(name for name in names if name)
        raise InvalidArgument(
            f"{field} {value!r} is not one of {words}",
            hint=f"pass {field} as one of {words}",
            metadata={"field": field},
        )
    return found


def parse_source(value: str) -> common_pb2.Source.ValueType:
    """The ``Source`` a user's word names: active (or telegram, or empty) or all.

    Raises:
        InvalidArgument: any other word (``field=source``).
    """
    return _parse("source", value, SOURCE_NAMES)


def parse_mode(value: str) -> common_pb2.SearchMode.ValueType:
    """The ``SearchMode`` a user's word names: hybrid (or empty), lexical or dense.

    Raises:
        InvalidArgument: any other word (``field=mode``).
    """
    return _parse("mode", value, SEARCH_MODE_NAMES)


def mode_word(mode: int) -> str:
    """The word of a ``SearchMode`` (unspecified is hybrid).

    Raises:
        InvalidArgument: a number the enum does not define (``field=mode``).
    """
    word = _enum(common_pb2.SearchMode.DESCRIPTOR, mode or common_pb2.SEARCH_MODE_HYBRID)
    if word is None:
        raise InvalidArgument(
            f"mode {mode} is not hybrid, lexical or dense", metadata={"field": "mode"}
        )
    return word


def _prefix(descriptor: EnumDescriptor) -> str:
    prefix = _prefixes.get(descriptor.full_name)
    if prefix is None:
        prefix = re.sub(r"(?<!^)(?=[A-Z])", "_", descriptor.name).upper() + "_"
        _prefixes[descriptor.full_name] = prefix
    return prefix


def _enum(descriptor: EnumDescriptor, number: int) -> str | None:
    value = descriptor.values_by_number.get(number)
    if number == 0 or value is None:
        return None
    return value.name.removeprefix(_prefix(descriptor)).lower()


def _enum_number(descriptor: EnumDescriptor, word: str | None) -> int:
    """The number of an enum word; 0 (unspecified) for null or a word the enum lacks."""
    if word is None:
        return 0
    value = descriptor.values_by_name.get(_prefix(descriptor) + word.upper())
    return 0 if value is None else int(value.number)


def _scalar(field: _Field, value: Any) -> Any:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return to_json(value)
    if field.type == FieldDescriptor.TYPE_ENUM:
        return _enum(field.enum_type, value)
    return value


def _omit(field: _Field) -> bool:
    return bool(field.GetOptions().Extensions[common_pb2.omit_empty])


def _oneof(field: _Field) -> Any:
    """The real ``oneof`` ``field`` belongs to; None for none or a proto3 ``optional``'s own."""
    oneof = field.containing_oneof
    if oneof is None or (len(oneof.fields) == 1 and oneof.name == f"_{field.name}"):
        return None
    return oneof


def _tagged(oneof: Any) -> bool:
    return bool(oneof.GetOptions().Extensions[common_pb2.tagged])


def _takes(field: _Field, value: Any) -> bool:
    """Whether a oneof member of ``field``'s type can hold the JSON ``value``."""
    cpp = field.cpp_type
    if isinstance(value, bool):
        return bool(cpp == FieldDescriptor.CPPTYPE_BOOL)
    if isinstance(value, int):
        return cpp in _INT_TYPES
    if isinstance(value, float):
        return cpp in (FieldDescriptor.CPPTYPE_DOUBLE, FieldDescriptor.CPPTYPE_FLOAT)
    if isinstance(value, str):
        return cpp in (FieldDescriptor.CPPTYPE_STRING, FieldDescriptor.CPPTYPE_ENUM)
    if cpp != FieldDescriptor.CPPTYPE_MESSAGE or not isinstance(value, Mapping):
        return False
    return all(key in field.message_type.fields_by_name for key in value)


def to_json(message: Message) -> dict[str, Any]:
    """The JSON object of a typed message (the rules are in the module docstring)."""
    out: dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        oneof = _oneof(field)
        if oneof is not None:
            if oneof.name not in out:
                which = message.WhichOneof(oneof.name)
                if _tagged(oneof):
                    out[oneof.name] = which
                    if which is not None:
                        out.update(to_json(getattr(message, which)))
                    continue
                out[oneof.name] = (
                    None
                    if which is None
                    else _scalar(message.DESCRIPTOR.fields_by_name[which], getattr(message, which))
                )
            continue
        value = getattr(message, field.name)
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            entry = field.message_type.fields_by_name["value"]
            mapped = {key: _scalar(entry, item) for key, item in value.items()}
            if mapped or not _omit(field):
                out[field.name] = mapped
        elif field.is_repeated:
            items = [_scalar(field, item) for item in value]
            if items or not _omit(field):
                out[field.name] = items
        elif field.has_presence:
            if message.HasField(field.name):
                out[field.name] = _scalar(field, value)
            elif not _omit(field):
                out[field.name] = None
        elif not (_omit(field) and value == field.default_value):
            out[field.name] = _scalar(field, value)
    return out


def _value(field: _Field, value: Any) -> Any:
    if field.type == FieldDescriptor.TYPE_ENUM:
        return _enum_number(field.enum_type, value)
    return value


def answer_json(reply: Message) -> dict[str, Any]:
    """A unary reply's answer as JSON: its ``result`` field, or the set member of its ``result``
    oneof (a reply that answers in one of several messages); {} when no member is set."""
    if _RESULT in reply.DESCRIPTOR.oneofs_by_name:
        which = reply.WhichOneof(_RESULT)
        return {} if which is None else to_json(getattr(reply, which))
    result: Message = getattr(reply, _RESULT)
    return to_json(result)


def event_report(event: common_pb2.OperationEvent) -> dict[str, Any] | None:
    """The final report an ``OperationEvent`` carries, as JSON; None for progress (or none)."""
    kind = event.WhichOneof("event")
    if kind is None or kind == "progress":
        return None
    report: Message = getattr(event, kind)
    return to_json(report)


def _untag(doc: Mapping[str, Any], message: Message, oneof: Any) -> dict[str, Any]:
    """Fill the member of the tagged ``oneof`` that ``doc`` names; the keys left for the parent.

    Raises:
        KeyError: a name that is no member of the oneof.
    """
    fields = message.DESCRIPTOR.fields_by_name
    name = doc[oneof.name]
    if not isinstance(name, str) or name not in {f.name for f in oneof.fields}:
        raise KeyError(f"{message.DESCRIPTOR.name}.{oneof.name} has no member {name!r}")
    member = getattr(message, name)
    member.SetInParent()
    from_json({k: v for k, v in doc.items() if k not in fields and k != oneof.name}, member)
    return {k: v for k, v in doc.items() if k in fields}


def from_json(doc: Mapping[str, Any], message: M) -> M:
    """Fill ``message`` from a JSON-shaped mapping by the same rules, and return it.

    The inverse of ``to_json``: null leaves a field unset, an enum word the enum lacks is its
    unspecified value.

    Raises:
        KeyError: a key the message has no field for (a result shape drifting from its proto).
    """
    descriptor = message.DESCRIPTOR
    for oneof in descriptor.oneofs:
        if _tagged(oneof) and doc.get(oneof.name) is not None:
            doc = _untag(doc, message, oneof)
    for key, value in doc.items():
        if value is None:
            continue
        if key in descriptor.oneofs_by_name and key not in descriptor.fields_by_name:
            members = descriptor.oneofs_by_name[key].fields
            field = next((f for f in members if _takes(f, value)), None)
            if field is None:
                raise KeyError(f"{descriptor.name}.{key} has no member that takes {value!r}")
            key = field.name
        else:
            field = descriptor.fields_by_name[key]
        target = getattr(message, key)
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            entry = field.message_type.fields_by_name["value"]
            for k, item in value.items():
                if entry.type == FieldDescriptor.TYPE_MESSAGE:
                    from_json(item, target[k])
                else:
                    target[k] = _value(entry, item)
        elif field.is_repeated:
            for item in value:
                if field.type == FieldDescriptor.TYPE_MESSAGE:
                    from_json(item, target.add())
                else:
                    target.append(_value(field, item))
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            target.SetInParent()
            from_json(value, target)
        else:
            setattr(message, key, _value(field, value))
    return message
