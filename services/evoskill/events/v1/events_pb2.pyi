from evoskill.common.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class StepExecuted(_message.Message):
    __slots__ = ("transition",)
    TRANSITION_FIELD_NUMBER: _ClassVar[int]
    transition: _common_pb2.Transition
    def __init__(self, transition: _Optional[_Union[_common_pb2.Transition, _Mapping]] = ...) -> None: ...

class RewardScored(_message.Message):
    __slots__ = ("transition", "total", "terms", "completion", "efficiency", "safety", "external_failure")
    class TermsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    TRANSITION_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    TERMS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_FIELD_NUMBER: _ClassVar[int]
    EFFICIENCY_FIELD_NUMBER: _ClassVar[int]
    SAFETY_FIELD_NUMBER: _ClassVar[int]
    EXTERNAL_FAILURE_FIELD_NUMBER: _ClassVar[int]
    transition: _common_pb2.Transition
    total: float
    terms: _containers.ScalarMap[str, float]
    completion: float
    efficiency: float
    safety: float
    external_failure: bool
    def __init__(self, transition: _Optional[_Union[_common_pb2.Transition, _Mapping]] = ..., total: _Optional[float] = ..., terms: _Optional[_Mapping[str, float]] = ..., completion: _Optional[float] = ..., efficiency: _Optional[float] = ..., safety: _Optional[float] = ..., external_failure: _Optional[bool] = ...) -> None: ...

class SearchTarget(_message.Message):
    __slots__ = ("actions", "visit_probs", "q_values", "priors", "root_value", "templates", "seen", "policy_probs")
    ACTIONS_FIELD_NUMBER: _ClassVar[int]
    VISIT_PROBS_FIELD_NUMBER: _ClassVar[int]
    Q_VALUES_FIELD_NUMBER: _ClassVar[int]
    PRIORS_FIELD_NUMBER: _ClassVar[int]
    ROOT_VALUE_FIELD_NUMBER: _ClassVar[int]
    TEMPLATES_FIELD_NUMBER: _ClassVar[int]
    SEEN_FIELD_NUMBER: _ClassVar[int]
    POLICY_PROBS_FIELD_NUMBER: _ClassVar[int]
    actions: _containers.RepeatedScalarFieldContainer[str]
    visit_probs: _containers.RepeatedScalarFieldContainer[float]
    q_values: _containers.RepeatedScalarFieldContainer[float]
    priors: _containers.RepeatedScalarFieldContainer[float]
    root_value: float
    templates: _containers.RepeatedScalarFieldContainer[str]
    seen: _containers.RepeatedScalarFieldContainer[bool]
    policy_probs: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, actions: _Optional[_Iterable[str]] = ..., visit_probs: _Optional[_Iterable[float]] = ..., q_values: _Optional[_Iterable[float]] = ..., priors: _Optional[_Iterable[float]] = ..., root_value: _Optional[float] = ..., templates: _Optional[_Iterable[str]] = ..., seen: _Optional[_Iterable[bool]] = ..., policy_probs: _Optional[_Iterable[float]] = ...) -> None: ...

class EpisodeStep(_message.Message):
    __slots__ = ("target", "reward", "index", "action", "observation", "env_reward", "failure", "env_steps", "llm", "exploration")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    REWARD_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    ENV_REWARD_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    ENV_STEPS_FIELD_NUMBER: _ClassVar[int]
    LLM_FIELD_NUMBER: _ClassVar[int]
    EXPLORATION_FIELD_NUMBER: _ClassVar[int]
    target: SearchTarget
    reward: float
    index: int
    action: _common_pb2.Action
    observation: _common_pb2.Observation
    env_reward: float
    failure: _common_pb2.Failure
    env_steps: int
    llm: _common_pb2.LlmUsage
    exploration: str
    def __init__(self, target: _Optional[_Union[SearchTarget, _Mapping]] = ..., reward: _Optional[float] = ..., index: _Optional[int] = ..., action: _Optional[_Union[_common_pb2.Action, _Mapping]] = ..., observation: _Optional[_Union[_common_pb2.Observation, _Mapping]] = ..., env_reward: _Optional[float] = ..., failure: _Optional[_Union[_common_pb2.Failure, _Mapping]] = ..., env_steps: _Optional[int] = ..., llm: _Optional[_Union[_common_pb2.LlmUsage, _Mapping]] = ..., exploration: _Optional[str] = ...) -> None: ...

class EpisodeCompleted(_message.Message):
    __slots__ = ("episode_id", "env_spec", "seed", "fold", "steps", "total_reward", "score", "won", "env_steps", "agent", "policy_version", "initial", "trace_id", "workflow_id", "llm")
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    ENV_SPEC_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    FOLD_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_REWARD_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    WON_FIELD_NUMBER: _ClassVar[int]
    ENV_STEPS_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    POLICY_VERSION_FIELD_NUMBER: _ClassVar[int]
    INITIAL_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    LLM_FIELD_NUMBER: _ClassVar[int]
    episode_id: str
    env_spec: str
    seed: int
    fold: str
    steps: _containers.RepeatedCompositeFieldContainer[EpisodeStep]
    total_reward: float
    score: float
    won: bool
    env_steps: int
    agent: str
    policy_version: str
    initial: _common_pb2.Observation
    trace_id: str
    workflow_id: str
    llm: _common_pb2.LlmUsage
    def __init__(self, episode_id: _Optional[str] = ..., env_spec: _Optional[str] = ..., seed: _Optional[int] = ..., fold: _Optional[str] = ..., steps: _Optional[_Iterable[_Union[EpisodeStep, _Mapping]]] = ..., total_reward: _Optional[float] = ..., score: _Optional[float] = ..., won: _Optional[bool] = ..., env_steps: _Optional[int] = ..., agent: _Optional[str] = ..., policy_version: _Optional[str] = ..., initial: _Optional[_Union[_common_pb2.Observation, _Mapping]] = ..., trace_id: _Optional[str] = ..., workflow_id: _Optional[str] = ..., llm: _Optional[_Union[_common_pb2.LlmUsage, _Mapping]] = ...) -> None: ...

class SearchStats(_message.Message):
    __slots__ = ("episode_id", "step_index", "simulations", "nodes", "max_depth", "early_stopped", "seconds")
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_INDEX_FIELD_NUMBER: _ClassVar[int]
    SIMULATIONS_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    MAX_DEPTH_FIELD_NUMBER: _ClassVar[int]
    EARLY_STOPPED_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    episode_id: str
    step_index: int
    simulations: int
    nodes: int
    max_depth: int
    early_stopped: bool
    seconds: float
    def __init__(self, episode_id: _Optional[str] = ..., step_index: _Optional[int] = ..., simulations: _Optional[int] = ..., nodes: _Optional[int] = ..., max_depth: _Optional[int] = ..., early_stopped: _Optional[bool] = ..., seconds: _Optional[float] = ...) -> None: ...

class PolicyPublished(_message.Message):
    __slots__ = ("version", "metrics")
    class MetricsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    VERSION_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    version: str
    metrics: _containers.ScalarMap[str, float]
    def __init__(self, version: _Optional[str] = ..., metrics: _Optional[_Mapping[str, float]] = ...) -> None: ...

class PolicyServing(_message.Message):
    __slots__ = ("version", "previous_version", "reason", "changed_unix_ms")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_VERSION_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    CHANGED_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    version: str
    previous_version: str
    reason: str
    changed_unix_ms: int
    def __init__(self, version: _Optional[str] = ..., previous_version: _Optional[str] = ..., reason: _Optional[str] = ..., changed_unix_ms: _Optional[int] = ...) -> None: ...

class DeadLetter(_message.Message):
    __slots__ = ("subject", "payload", "headers", "error", "consumer", "deliveries", "payload_size", "payload_sha256", "payload_truncated")
    class HeadersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_FIELD_NUMBER: _ClassVar[int]
    DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_SHA256_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    subject: str
    payload: bytes
    headers: _containers.ScalarMap[str, str]
    error: str
    consumer: str
    deliveries: int
    payload_size: int
    payload_sha256: str
    payload_truncated: bool
    def __init__(self, subject: _Optional[str] = ..., payload: _Optional[bytes] = ..., headers: _Optional[_Mapping[str, str]] = ..., error: _Optional[str] = ..., consumer: _Optional[str] = ..., deliveries: _Optional[int] = ..., payload_size: _Optional[int] = ..., payload_sha256: _Optional[str] = ..., payload_truncated: _Optional[bool] = ...) -> None: ...
