from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class FailureKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FAILURE_KIND_UNSPECIFIED: _ClassVar[FailureKind]
    FAILURE_KIND_NONE: _ClassVar[FailureKind]
    FAILURE_KIND_INVALID_ACTION: _ClassVar[FailureKind]
    FAILURE_KIND_NO_EFFECT: _ClassVar[FailureKind]
    FAILURE_KIND_EXTERNAL_ERROR: _ClassVar[FailureKind]
    FAILURE_KIND_EXTERNAL_TIMEOUT: _ClassVar[FailureKind]
FAILURE_KIND_UNSPECIFIED: FailureKind
FAILURE_KIND_NONE: FailureKind
FAILURE_KIND_INVALID_ACTION: FailureKind
FAILURE_KIND_NO_EFFECT: FailureKind
FAILURE_KIND_EXTERNAL_ERROR: FailureKind
FAILURE_KIND_EXTERNAL_TIMEOUT: FailureKind

class Observation(_message.Message):
    __slots__ = ("text", "goal", "valid_actions", "score", "done", "won", "lost", "moves", "inventory", "look")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    GOAL_FIELD_NUMBER: _ClassVar[int]
    VALID_ACTIONS_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    WON_FIELD_NUMBER: _ClassVar[int]
    LOST_FIELD_NUMBER: _ClassVar[int]
    MOVES_FIELD_NUMBER: _ClassVar[int]
    INVENTORY_FIELD_NUMBER: _ClassVar[int]
    LOOK_FIELD_NUMBER: _ClassVar[int]
    text: str
    goal: str
    valid_actions: _containers.RepeatedScalarFieldContainer[str]
    score: float
    done: bool
    won: bool
    lost: bool
    moves: int
    inventory: str
    look: str
    def __init__(self, text: _Optional[str] = ..., goal: _Optional[str] = ..., valid_actions: _Optional[_Iterable[str]] = ..., score: _Optional[float] = ..., done: _Optional[bool] = ..., won: _Optional[bool] = ..., lost: _Optional[bool] = ..., moves: _Optional[int] = ..., inventory: _Optional[str] = ..., look: _Optional[str] = ...) -> None: ...

class Action(_message.Message):
    __slots__ = ("text", "template")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    text: str
    template: str
    def __init__(self, text: _Optional[str] = ..., template: _Optional[str] = ...) -> None: ...

class Failure(_message.Message):
    __slots__ = ("kind", "message", "injected")
    KIND_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    INJECTED_FIELD_NUMBER: _ClassVar[int]
    kind: FailureKind
    message: str
    injected: bool
    def __init__(self, kind: _Optional[_Union[FailureKind, str]] = ..., message: _Optional[str] = ..., injected: _Optional[bool] = ...) -> None: ...

class HistoryDigest(_message.Message):
    __slots__ = ("actions", "feedbacks", "revealed_words")
    ACTIONS_FIELD_NUMBER: _ClassVar[int]
    FEEDBACKS_FIELD_NUMBER: _ClassVar[int]
    REVEALED_WORDS_FIELD_NUMBER: _ClassVar[int]
    actions: _containers.RepeatedScalarFieldContainer[int]
    feedbacks: _containers.RepeatedScalarFieldContainer[int]
    revealed_words: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, actions: _Optional[_Iterable[int]] = ..., feedbacks: _Optional[_Iterable[int]] = ..., revealed_words: _Optional[_Iterable[str]] = ...) -> None: ...

class Transition(_message.Message):
    __slots__ = ("episode_id", "step_index", "env_spec", "before", "action", "after", "env_reward", "failure", "history")
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_INDEX_FIELD_NUMBER: _ClassVar[int]
    ENV_SPEC_FIELD_NUMBER: _ClassVar[int]
    BEFORE_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    ENV_REWARD_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    episode_id: str
    step_index: int
    env_spec: str
    before: Observation
    action: Action
    after: Observation
    env_reward: float
    failure: Failure
    history: HistoryDigest
    def __init__(self, episode_id: _Optional[str] = ..., step_index: _Optional[int] = ..., env_spec: _Optional[str] = ..., before: _Optional[_Union[Observation, _Mapping]] = ..., action: _Optional[_Union[Action, _Mapping]] = ..., after: _Optional[_Union[Observation, _Mapping]] = ..., env_reward: _Optional[float] = ..., failure: _Optional[_Union[Failure, _Mapping]] = ..., history: _Optional[_Union[HistoryDigest, _Mapping]] = ...) -> None: ...

class LlmUsage(_message.Message):
    __slots__ = ("requests", "cached", "failures", "prompt_tokens", "completion_tokens", "cost_usd")
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    CACHED_FIELD_NUMBER: _ClassVar[int]
    FAILURES_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COST_USD_FIELD_NUMBER: _ClassVar[int]
    requests: int
    cached: int
    failures: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    def __init__(self, requests: _Optional[int] = ..., cached: _Optional[int] = ..., failures: _Optional[int] = ..., prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ..., cost_usd: _Optional[float] = ...) -> None: ...
