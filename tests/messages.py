"""Hypothesis strategies for any protobuf message, built from its descriptor: what an attacker or a buggy
client may send. Numbers include NaN, infinities and huge values; strings include the values the services
know (so some requests get past the first check) and ones longer than any id or action may be.
`perturbed(valid)` keeps a valid message but one field, so requests reach the code behind the first check."""

from __future__ import annotations

from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from hypothesis import strategies as st

KNOWN_STRINGS = ("", "twx:coin", "twx:coin?numLocations=1", "train", "test", "mcts", "random", "policy",
                 "policy+mcts", "demo", "v000001", "1", "move north", "look around", "e1", "puct", "gumbel")
_strings = st.one_of(st.sampled_from(KNOWN_STRINGS), st.text(max_size=12), st.just("x" * 2000))
_INTS = {
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1), FieldDescriptor.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SFIXED32: (-(2**31), 2**31 - 1), FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1), FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_SINT64: (-(2**63), 2**63 - 1), FieldDescriptor.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1), FieldDescriptor.TYPE_FIXED64: (0, 2**64 - 1),
}


def _ints(low: int, high: int) -> st.SearchStrategy[int]:
    return st.one_of(st.integers(max(low, -3), 8), st.integers(low, high), st.sampled_from([low, high]))


def _scalar(field: FieldDescriptor, depth: int) -> st.SearchStrategy[Any]:
    t = field.type
    if t == FieldDescriptor.TYPE_MESSAGE:
        assert field.message_type is not None
        return messages(field.message_type, depth - 1)
    if t == FieldDescriptor.TYPE_DOUBLE:
        return st.one_of(st.floats(), st.sampled_from([0.0, 0.5, 1.0, -1.0, 1e300]))
    if t == FieldDescriptor.TYPE_FLOAT:
        return st.one_of(st.floats(width=32), st.sampled_from([0.0, 0.5, 1.0]))
    if t == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if t == FieldDescriptor.TYPE_STRING:
        return _strings
    if t == FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=16)
    if t == FieldDescriptor.TYPE_ENUM:
        assert field.enum_type is not None
        return st.sampled_from([v.number for v in field.enum_type.values])
    return _ints(*_INTS[t])


def _field(field: FieldDescriptor, depth: int) -> st.SearchStrategy[Any]:
    entry = field.message_type
    if entry is not None and entry.GetOptions().map_entry:
        key, value = entry.fields_by_name["key"], entry.fields_by_name["value"]
        return st.dictionaries(_scalar(key, depth), _scalar(value, depth), max_size=3)
    if field.is_repeated:
        return st.lists(_scalar(field, depth), max_size=4)
    return _scalar(field, depth)


def messages(descriptor: Descriptor | type[Message], depth: int = 4) -> st.SearchStrategy[Message]:
    """Messages of the type with any subset of its fields set (nesting stops at `depth`)."""
    if not isinstance(descriptor, Descriptor):
        descriptor = descriptor.DESCRIPTOR
    fields = [f for f in descriptor.fields if f.type != FieldDescriptor.TYPE_MESSAGE or depth > 0]
    cls = _class_of(descriptor)
    optional = {f.name: _field(f, depth) for f in fields}
    return st.fixed_dictionaries({}, optional=optional).map(lambda values: _build(cls, values))


def perturbed(valid: Message, depth: int = 3) -> st.SearchStrategy[Message]:
    """`valid` with one of its fields (set or not) replaced by anything its type allows."""
    fields = list(valid.DESCRIPTOR.fields)

    def replace(field: FieldDescriptor) -> st.SearchStrategy[Message]:
        def build(value: Any) -> Message:
            message = type(valid)()
            message.CopyFrom(valid)
            message.ClearField(field.name)
            return _set(message, field, value)

        anything = _field(field, depth).map(build)
        if field.is_repeated or field.message_type is None or not valid.HasField(field.name):
            return anything
        return st.one_of(anything, perturbed(getattr(valid, field.name), depth - 1).map(build))  # a field inside

    return st.sampled_from(fields).flatmap(replace)


def _build(cls: type[Message], values: dict[str, Any]) -> Message:
    message = cls()
    for name, value in values.items():  # one at a time: a later member of a oneof replaces an earlier one
        _set(message, message.DESCRIPTOR.fields_by_name[name], value)
    return message


def _set(message: Message, field: FieldDescriptor, value: Any) -> Message:
    target = getattr(message, field.name)
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        for k, v in value.items():
            if field.message_type.fields_by_name["value"].message_type is not None:
                target[k].CopyFrom(v)
            else:
                target[k] = v
    elif field.is_repeated:
        target.extend(value)
    elif field.type == FieldDescriptor.TYPE_MESSAGE:
        target.CopyFrom(value)
    else:
        setattr(message, field.name, value)
    return message


def _class_of(descriptor: Descriptor) -> type[Message]:
    from google.protobuf import message_factory

    return message_factory.GetMessageClass(descriptor)
