from evoskill.common.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Probe(_message.Message):
    __slots__ = ("actions", "rollout_depth", "rollout_seed")
    ACTIONS_FIELD_NUMBER: _ClassVar[int]
    ROLLOUT_DEPTH_FIELD_NUMBER: _ClassVar[int]
    ROLLOUT_SEED_FIELD_NUMBER: _ClassVar[int]
    actions: _containers.RepeatedScalarFieldContainer[str]
    rollout_depth: int
    rollout_seed: int
    def __init__(self, actions: _Optional[_Iterable[str]] = ..., rollout_depth: _Optional[int] = ..., rollout_seed: _Optional[int] = ...) -> None: ...

class ProbeResult(_message.Message):
    __slots__ = ("transition", "observation", "templates", "state_key", "rollout_return", "rollout_steps", "rollout_outcome", "rollout_final_score")
    TRANSITION_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    TEMPLATES_FIELD_NUMBER: _ClassVar[int]
    STATE_KEY_FIELD_NUMBER: _ClassVar[int]
    ROLLOUT_RETURN_FIELD_NUMBER: _ClassVar[int]
    ROLLOUT_STEPS_FIELD_NUMBER: _ClassVar[int]
    ROLLOUT_OUTCOME_FIELD_NUMBER: _ClassVar[int]
    ROLLOUT_FINAL_SCORE_FIELD_NUMBER: _ClassVar[int]
    transition: _common_pb2.Transition
    observation: _common_pb2.Observation
    templates: _containers.RepeatedScalarFieldContainer[str]
    state_key: str
    rollout_return: float
    rollout_steps: int
    rollout_outcome: float
    rollout_final_score: float
    def __init__(self, transition: _Optional[_Union[_common_pb2.Transition, _Mapping]] = ..., observation: _Optional[_Union[_common_pb2.Observation, _Mapping]] = ..., templates: _Optional[_Iterable[str]] = ..., state_key: _Optional[str] = ..., rollout_return: _Optional[float] = ..., rollout_steps: _Optional[int] = ..., rollout_outcome: _Optional[float] = ..., rollout_final_score: _Optional[float] = ...) -> None: ...

class SimulateRequest(_message.Message):
    __slots__ = ("session_id", "probes", "gamma")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PROBES_FIELD_NUMBER: _ClassVar[int]
    GAMMA_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    probes: _containers.RepeatedCompositeFieldContainer[Probe]
    gamma: float
    def __init__(self, session_id: _Optional[str] = ..., probes: _Optional[_Iterable[_Union[Probe, _Mapping]]] = ..., gamma: _Optional[float] = ...) -> None: ...

class SimulateReply(_message.Message):
    __slots__ = ("results", "env_steps", "partial")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    ENV_STEPS_FIELD_NUMBER: _ClassVar[int]
    PARTIAL_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[ProbeResult]
    env_steps: int
    partial: bool
    def __init__(self, results: _Optional[_Iterable[_Union[ProbeResult, _Mapping]]] = ..., env_steps: _Optional[int] = ..., partial: _Optional[bool] = ...) -> None: ...

class CreateSessionRequest(_message.Message):
    __slots__ = ("env_spec", "seed", "fold", "episode_id", "step_quota", "gold_path")
    ENV_SPEC_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    FOLD_FIELD_NUMBER: _ClassVar[int]
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_QUOTA_FIELD_NUMBER: _ClassVar[int]
    GOLD_PATH_FIELD_NUMBER: _ClassVar[int]
    env_spec: str
    seed: int
    fold: str
    episode_id: str
    step_quota: int
    gold_path: bool
    def __init__(self, env_spec: _Optional[str] = ..., seed: _Optional[int] = ..., fold: _Optional[str] = ..., episode_id: _Optional[str] = ..., step_quota: _Optional[int] = ..., gold_path: _Optional[bool] = ...) -> None: ...

class SessionReply(_message.Message):
    __slots__ = ("session_id", "episode_id", "observation", "gold_path")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    GOLD_PATH_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    episode_id: str
    observation: _common_pb2.Observation
    gold_path: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, session_id: _Optional[str] = ..., episode_id: _Optional[str] = ..., observation: _Optional[_Union[_common_pb2.Observation, _Mapping]] = ..., gold_path: _Optional[_Iterable[str]] = ...) -> None: ...

class StepRequest(_message.Message):
    __slots__ = ("session_id", "action", "publish")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    PUBLISH_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    action: str
    publish: bool
    def __init__(self, session_id: _Optional[str] = ..., action: _Optional[str] = ..., publish: _Optional[bool] = ...) -> None: ...

class StepReply(_message.Message):
    __slots__ = ("transition",)
    TRANSITION_FIELD_NUMBER: _ClassVar[int]
    transition: _common_pb2.Transition
    def __init__(self, transition: _Optional[_Union[_common_pb2.Transition, _Mapping]] = ...) -> None: ...

class CloseSessionRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class CloseSessionReply(_message.Message):
    __slots__ = ("steps",)
    STEPS_FIELD_NUMBER: _ClassVar[int]
    steps: int
    def __init__(self, steps: _Optional[int] = ...) -> None: ...
