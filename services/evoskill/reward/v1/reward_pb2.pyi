from evoskill.common.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ScoreRequest(_message.Message):
    __slots__ = ("transition",)
    TRANSITION_FIELD_NUMBER: _ClassVar[int]
    transition: _common_pb2.Transition
    def __init__(self, transition: _Optional[_Union[_common_pb2.Transition, _Mapping]] = ...) -> None: ...

class RewardBreakdown(_message.Message):
    __slots__ = ("total", "terms", "completion", "efficiency", "safety", "curiosity", "external_failure")
    class TermsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    TERMS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_FIELD_NUMBER: _ClassVar[int]
    EFFICIENCY_FIELD_NUMBER: _ClassVar[int]
    SAFETY_FIELD_NUMBER: _ClassVar[int]
    CURIOSITY_FIELD_NUMBER: _ClassVar[int]
    EXTERNAL_FAILURE_FIELD_NUMBER: _ClassVar[int]
    total: float
    terms: _containers.ScalarMap[str, float]
    completion: float
    efficiency: float
    safety: float
    curiosity: float
    external_failure: bool
    def __init__(self, total: _Optional[float] = ..., terms: _Optional[_Mapping[str, float]] = ..., completion: _Optional[float] = ..., efficiency: _Optional[float] = ..., safety: _Optional[float] = ..., curiosity: _Optional[float] = ..., external_failure: _Optional[bool] = ...) -> None: ...
