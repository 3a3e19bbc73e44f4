from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Outcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OUTCOME_PENDING: _ClassVar[Outcome]
    OUTCOME_WON: _ClassVar[Outcome]
    OUTCOME_LOST: _ClassVar[Outcome]
OUTCOME_PENDING: Outcome
OUTCOME_WON: Outcome
OUTCOME_LOST: Outcome

class Experience(_message.Message):
    __slots__ = ("id", "goal", "state", "action", "template", "feedback", "reward", "success", "env_spec", "episode_id", "step_index", "metadata", "outcome", "episode_score", "env_family", "session_id", "policy_version", "agent", "env_steps", "time_unix_ms", "seed")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    GOAL_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    FEEDBACK_FIELD_NUMBER: _ClassVar[int]
    REWARD_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ENV_SPEC_FIELD_NUMBER: _ClassVar[int]
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_INDEX_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    EPISODE_SCORE_FIELD_NUMBER: _ClassVar[int]
    ENV_FAMILY_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    POLICY_VERSION_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    ENV_STEPS_FIELD_NUMBER: _ClassVar[int]
    TIME_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    id: str
    goal: str
    state: str
    action: str
    template: str
    feedback: str
    reward: float
    success: bool
    env_spec: str
    episode_id: str
    step_index: int
    metadata: _containers.ScalarMap[str, str]
    outcome: Outcome
    episode_score: float
    env_family: str
    session_id: str
    policy_version: str
    agent: str
    env_steps: int
    time_unix_ms: int
    seed: int
    def __init__(self, id: _Optional[str] = ..., goal: _Optional[str] = ..., state: _Optional[str] = ..., action: _Optional[str] = ..., template: _Optional[str] = ..., feedback: _Optional[str] = ..., reward: _Optional[float] = ..., success: _Optional[bool] = ..., env_spec: _Optional[str] = ..., episode_id: _Optional[str] = ..., step_index: _Optional[int] = ..., metadata: _Optional[_Mapping[str, str]] = ..., outcome: _Optional[_Union[Outcome, str]] = ..., episode_score: _Optional[float] = ..., env_family: _Optional[str] = ..., session_id: _Optional[str] = ..., policy_version: _Optional[str] = ..., agent: _Optional[str] = ..., env_steps: _Optional[int] = ..., time_unix_ms: _Optional[int] = ..., seed: _Optional[int] = ...) -> None: ...

class StoreRequest(_message.Message):
    __slots__ = ("experiences",)
    EXPERIENCES_FIELD_NUMBER: _ClassVar[int]
    experiences: _containers.RepeatedCompositeFieldContainer[Experience]
    def __init__(self, experiences: _Optional[_Iterable[_Union[Experience, _Mapping]]] = ...) -> None: ...

class StoreReply(_message.Message):
    __slots__ = ("stored",)
    STORED_FIELD_NUMBER: _ClassVar[int]
    stored: int
    def __init__(self, stored: _Optional[int] = ...) -> None: ...

class RetrieveRequest(_message.Message):
    __slots__ = ("goal", "state", "limit", "recall", "reward_weight", "diversity", "env_spec", "profile", "outcome_weight", "novelty_weight", "taken_actions", "env_family", "template", "outcomes", "alternatives", "seed")
    GOAL_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    RECALL_FIELD_NUMBER: _ClassVar[int]
    REWARD_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    DIVERSITY_FIELD_NUMBER: _ClassVar[int]
    ENV_SPEC_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    NOVELTY_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    TAKEN_ACTIONS_FIELD_NUMBER: _ClassVar[int]
    ENV_FAMILY_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    ALTERNATIVES_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    goal: str
    state: str
    limit: int
    recall: int
    reward_weight: float
    diversity: float
    env_spec: str
    profile: str
    outcome_weight: float
    novelty_weight: float
    taken_actions: _containers.RepeatedScalarFieldContainer[str]
    env_family: str
    template: str
    outcomes: _containers.RepeatedScalarFieldContainer[Outcome]
    alternatives: bool
    seed: int
    def __init__(self, goal: _Optional[str] = ..., state: _Optional[str] = ..., limit: _Optional[int] = ..., recall: _Optional[int] = ..., reward_weight: _Optional[float] = ..., diversity: _Optional[float] = ..., env_spec: _Optional[str] = ..., profile: _Optional[str] = ..., outcome_weight: _Optional[float] = ..., novelty_weight: _Optional[float] = ..., taken_actions: _Optional[_Iterable[str]] = ..., env_family: _Optional[str] = ..., template: _Optional[str] = ..., outcomes: _Optional[_Iterable[_Union[Outcome, str]]] = ..., alternatives: _Optional[bool] = ..., seed: _Optional[int] = ...) -> None: ...

class ScoredExperience(_message.Message):
    __slots__ = ("experience", "score", "similarity", "cold", "summarised", "own")
    EXPERIENCE_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    SIMILARITY_FIELD_NUMBER: _ClassVar[int]
    COLD_FIELD_NUMBER: _ClassVar[int]
    SUMMARISED_FIELD_NUMBER: _ClassVar[int]
    OWN_FIELD_NUMBER: _ClassVar[int]
    experience: Experience
    score: float
    similarity: float
    cold: bool
    summarised: int
    own: bool
    def __init__(self, experience: _Optional[_Union[Experience, _Mapping]] = ..., score: _Optional[float] = ..., similarity: _Optional[float] = ..., cold: _Optional[bool] = ..., summarised: _Optional[int] = ..., own: _Optional[bool] = ...) -> None: ...

class RetrieveReply(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[ScoredExperience]
    def __init__(self, results: _Optional[_Iterable[_Union[ScoredExperience, _Mapping]]] = ...) -> None: ...

class MemoryFilter(_message.Message):
    __slots__ = ("env_spec", "env_family", "outcomes", "episode_id", "template", "session_id")
    ENV_SPEC_FIELD_NUMBER: _ClassVar[int]
    ENV_FAMILY_FIELD_NUMBER: _ClassVar[int]
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    env_spec: str
    env_family: str
    outcomes: _containers.RepeatedScalarFieldContainer[Outcome]
    episode_id: str
    template: str
    session_id: str
    def __init__(self, env_spec: _Optional[str] = ..., env_family: _Optional[str] = ..., outcomes: _Optional[_Iterable[_Union[Outcome, str]]] = ..., episode_id: _Optional[str] = ..., template: _Optional[str] = ..., session_id: _Optional[str] = ...) -> None: ...

class ListRequest(_message.Message):
    __slots__ = ("filter", "limit", "page_token")
    FILTER_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    filter: MemoryFilter
    limit: int
    page_token: str
    def __init__(self, filter: _Optional[_Union[MemoryFilter, _Mapping]] = ..., limit: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListReply(_message.Message):
    __slots__ = ("experiences", "next_page_token", "matched")
    EXPERIENCES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    MATCHED_FIELD_NUMBER: _ClassVar[int]
    experiences: _containers.RepeatedCompositeFieldContainer[Experience]
    next_page_token: str
    matched: int
    def __init__(self, experiences: _Optional[_Iterable[_Union[Experience, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., matched: _Optional[int] = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ("ids",)
    IDS_FIELD_NUMBER: _ClassVar[int]
    ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, ids: _Optional[_Iterable[str]] = ...) -> None: ...

class GetReply(_message.Message):
    __slots__ = ("experiences",)
    EXPERIENCES_FIELD_NUMBER: _ClassVar[int]
    experiences: _containers.RepeatedCompositeFieldContainer[Experience]
    def __init__(self, experiences: _Optional[_Iterable[_Union[Experience, _Mapping]]] = ...) -> None: ...

class DeleteRequest(_message.Message):
    __slots__ = ("filter", "all")
    FILTER_FIELD_NUMBER: _ClassVar[int]
    ALL_FIELD_NUMBER: _ClassVar[int]
    filter: MemoryFilter
    all: bool
    def __init__(self, filter: _Optional[_Union[MemoryFilter, _Mapping]] = ..., all: _Optional[bool] = ...) -> None: ...

class DeleteReply(_message.Message):
    __slots__ = ("deleted",)
    DELETED_FIELD_NUMBER: _ClassVar[int]
    deleted: int
    def __init__(self, deleted: _Optional[int] = ...) -> None: ...

class StatsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TierStats(_message.Message):
    __slots__ = ("collection", "points", "oldest_unix_ms", "newest_unix_ms", "bytes")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    POINTS_FIELD_NUMBER: _ClassVar[int]
    OLDEST_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    NEWEST_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    collection: str
    points: int
    oldest_unix_ms: int
    newest_unix_ms: int
    bytes: int
    def __init__(self, collection: _Optional[str] = ..., points: _Optional[int] = ..., oldest_unix_ms: _Optional[int] = ..., newest_unix_ms: _Optional[int] = ..., bytes: _Optional[int] = ...) -> None: ...

class StatsReply(_message.Message):
    __slots__ = ("hot", "cold", "summarised", "summarised_episodes", "compactions", "last_compaction_unix_ms", "last_moved", "limits")
    HOT_FIELD_NUMBER: _ClassVar[int]
    COLD_FIELD_NUMBER: _ClassVar[int]
    SUMMARISED_FIELD_NUMBER: _ClassVar[int]
    SUMMARISED_EPISODES_FIELD_NUMBER: _ClassVar[int]
    COMPACTIONS_FIELD_NUMBER: _ClassVar[int]
    LAST_COMPACTION_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    LAST_MOVED_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    hot: TierStats
    cold: TierStats
    summarised: int
    summarised_episodes: int
    compactions: int
    last_compaction_unix_ms: int
    last_moved: int
    limits: str
    def __init__(self, hot: _Optional[_Union[TierStats, _Mapping]] = ..., cold: _Optional[_Union[TierStats, _Mapping]] = ..., summarised: _Optional[int] = ..., summarised_episodes: _Optional[int] = ..., compactions: _Optional[int] = ..., last_compaction_unix_ms: _Optional[int] = ..., last_moved: _Optional[int] = ..., limits: _Optional[str] = ...) -> None: ...

class CompactRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CompactReply(_message.Message):
    __slots__ = ("moved", "episodes", "reasons")
    class ReasonsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    MOVED_FIELD_NUMBER: _ClassVar[int]
    EPISODES_FIELD_NUMBER: _ClassVar[int]
    REASONS_FIELD_NUMBER: _ClassVar[int]
    moved: int
    episodes: int
    reasons: _containers.ScalarMap[str, int]
    def __init__(self, moved: _Optional[int] = ..., episodes: _Optional[int] = ..., reasons: _Optional[_Mapping[str, int]] = ...) -> None: ...
