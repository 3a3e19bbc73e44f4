from evoskill.events.v1 import events_pb2 as _events_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TrainRequest(_message.Message):
    __slots__ = ("steps", "batch_size", "online_fraction", "seed", "episode_ids", "wait_seconds", "request_id", "from_version")
    STEPS_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    ONLINE_FRACTION_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    EPISODE_IDS_FIELD_NUMBER: _ClassVar[int]
    WAIT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    FROM_VERSION_FIELD_NUMBER: _ClassVar[int]
    steps: int
    batch_size: int
    online_fraction: float
    seed: int
    episode_ids: _containers.RepeatedScalarFieldContainer[str]
    wait_seconds: float
    request_id: str
    from_version: str
    def __init__(self, steps: _Optional[int] = ..., batch_size: _Optional[int] = ..., online_fraction: _Optional[float] = ..., seed: _Optional[int] = ..., episode_ids: _Optional[_Iterable[str]] = ..., wait_seconds: _Optional[float] = ..., request_id: _Optional[str] = ..., from_version: _Optional[str] = ...) -> None: ...

class TrainReply(_message.Message):
    __slots__ = ("policy_version", "losses", "samples", "replay_size", "replay_episodes", "steps")
    class LossesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    POLICY_VERSION_FIELD_NUMBER: _ClassVar[int]
    LOSSES_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_FIELD_NUMBER: _ClassVar[int]
    REPLAY_SIZE_FIELD_NUMBER: _ClassVar[int]
    REPLAY_EPISODES_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    policy_version: str
    losses: _containers.ScalarMap[str, float]
    samples: int
    replay_size: int
    replay_episodes: int
    steps: int
    def __init__(self, policy_version: _Optional[str] = ..., losses: _Optional[_Mapping[str, float]] = ..., samples: _Optional[int] = ..., replay_size: _Optional[int] = ..., replay_episodes: _Optional[int] = ..., steps: _Optional[int] = ...) -> None: ...

class GetPolicyRequest(_message.Message):
    __slots__ = ("version", "serving")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    SERVING_FIELD_NUMBER: _ClassVar[int]
    version: str
    serving: bool
    def __init__(self, version: _Optional[str] = ..., serving: _Optional[bool] = ...) -> None: ...

class PolicyInfo(_message.Message):
    __slots__ = ("version", "onnx_model", "created_unix_ms", "metrics", "serving")
    class MetricsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    VERSION_FIELD_NUMBER: _ClassVar[int]
    ONNX_MODEL_FIELD_NUMBER: _ClassVar[int]
    CREATED_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    SERVING_FIELD_NUMBER: _ClassVar[int]
    version: str
    onnx_model: bytes
    created_unix_ms: int
    metrics: _containers.ScalarMap[str, float]
    serving: bool
    def __init__(self, version: _Optional[str] = ..., onnx_model: _Optional[bytes] = ..., created_unix_ms: _Optional[int] = ..., metrics: _Optional[_Mapping[str, float]] = ..., serving: _Optional[bool] = ...) -> None: ...

class ListPoliciesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListPoliciesReply(_message.Message):
    __slots__ = ("policies", "serving_version", "serving_reason", "serving_changed_unix_ms")
    POLICIES_FIELD_NUMBER: _ClassVar[int]
    SERVING_VERSION_FIELD_NUMBER: _ClassVar[int]
    SERVING_REASON_FIELD_NUMBER: _ClassVar[int]
    SERVING_CHANGED_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    policies: _containers.RepeatedCompositeFieldContainer[PolicyInfo]
    serving_version: str
    serving_reason: str
    serving_changed_unix_ms: int
    def __init__(self, policies: _Optional[_Iterable[_Union[PolicyInfo, _Mapping]]] = ..., serving_version: _Optional[str] = ..., serving_reason: _Optional[str] = ..., serving_changed_unix_ms: _Optional[int] = ...) -> None: ...

class SetServingRequest(_message.Message):
    __slots__ = ("version", "reason")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    version: str
    reason: str
    def __init__(self, version: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class SetServingReply(_message.Message):
    __slots__ = ("previous_version", "serving_version", "changed_unix_ms")
    PREVIOUS_VERSION_FIELD_NUMBER: _ClassVar[int]
    SERVING_VERSION_FIELD_NUMBER: _ClassVar[int]
    CHANGED_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    previous_version: str
    serving_version: str
    changed_unix_ms: int
    def __init__(self, previous_version: _Optional[str] = ..., serving_version: _Optional[str] = ..., changed_unix_ms: _Optional[int] = ...) -> None: ...

class ImportEpisodesRequest(_message.Message):
    __slots__ = ("episode",)
    EPISODE_FIELD_NUMBER: _ClassVar[int]
    episode: _events_pb2.EpisodeCompleted
    def __init__(self, episode: _Optional[_Union[_events_pb2.EpisodeCompleted, _Mapping]] = ...) -> None: ...

class ImportEpisodesReply(_message.Message):
    __slots__ = ("received", "stored", "duplicates", "library_episodes", "library_steps")
    RECEIVED_FIELD_NUMBER: _ClassVar[int]
    STORED_FIELD_NUMBER: _ClassVar[int]
    DUPLICATES_FIELD_NUMBER: _ClassVar[int]
    LIBRARY_EPISODES_FIELD_NUMBER: _ClassVar[int]
    LIBRARY_STEPS_FIELD_NUMBER: _ClassVar[int]
    received: int
    stored: int
    duplicates: int
    library_episodes: int
    library_steps: int
    def __init__(self, received: _Optional[int] = ..., stored: _Optional[int] = ..., duplicates: _Optional[int] = ..., library_episodes: _Optional[int] = ..., library_steps: _Optional[int] = ...) -> None: ...

class ExportEpisodesRequest(_message.Message):
    __slots__ = ("include_online",)
    INCLUDE_ONLINE_FIELD_NUMBER: _ClassVar[int]
    include_online: bool
    def __init__(self, include_online: _Optional[bool] = ...) -> None: ...
