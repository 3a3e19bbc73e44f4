from evoskill.common.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SearchConfig(_message.Message):
    __slots__ = ("num_simulations", "c_puct", "dirichlet_alpha", "dirichlet_weight", "rollout_depth", "gamma", "value_mix", "early_stop_fraction", "max_children", "agent", "policy_version", "batch_size", "seed", "widening_k", "hierarchical", "transpositions", "widening_alpha", "virtual_loss", "unvisited_parent", "unvisited_value", "normalize_q", "max_depth", "prefetch_children", "noop_penalty", "revisit_penalty", "memory_weight", "memory_limit", "policy_value_mix", "algorithm", "gumbel_max_actions", "gumbel_c_visit", "gumbel_c_scale", "gumbel_scale", "policy_revisit_penalty", "memory_profile", "entropy_trigger", "prune_losses", "time_budget_s", "explore_epsilon", "novelty_weight", "curiosity_weight", "memory_similar_share", "stall_trigger")
    NUM_SIMULATIONS_FIELD_NUMBER: _ClassVar[int]
    C_PUCT_FIELD_NUMBER: _ClassVar[int]
    DIRICHLET_ALPHA_FIELD_NUMBER: _ClassVar[int]
    DIRICHLET_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    ROLLOUT_DEPTH_FIELD_NUMBER: _ClassVar[int]
    GAMMA_FIELD_NUMBER: _ClassVar[int]
    VALUE_MIX_FIELD_NUMBER: _ClassVar[int]
    EARLY_STOP_FRACTION_FIELD_NUMBER: _ClassVar[int]
    MAX_CHILDREN_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    POLICY_VERSION_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    WIDENING_K_FIELD_NUMBER: _ClassVar[int]
    HIERARCHICAL_FIELD_NUMBER: _ClassVar[int]
    TRANSPOSITIONS_FIELD_NUMBER: _ClassVar[int]
    WIDENING_ALPHA_FIELD_NUMBER: _ClassVar[int]
    VIRTUAL_LOSS_FIELD_NUMBER: _ClassVar[int]
    UNVISITED_PARENT_FIELD_NUMBER: _ClassVar[int]
    UNVISITED_VALUE_FIELD_NUMBER: _ClassVar[int]
    NORMALIZE_Q_FIELD_NUMBER: _ClassVar[int]
    MAX_DEPTH_FIELD_NUMBER: _ClassVar[int]
    PREFETCH_CHILDREN_FIELD_NUMBER: _ClassVar[int]
    NOOP_PENALTY_FIELD_NUMBER: _ClassVar[int]
    REVISIT_PENALTY_FIELD_NUMBER: _ClassVar[int]
    MEMORY_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    MEMORY_LIMIT_FIELD_NUMBER: _ClassVar[int]
    POLICY_VALUE_MIX_FIELD_NUMBER: _ClassVar[int]
    ALGORITHM_FIELD_NUMBER: _ClassVar[int]
    GUMBEL_MAX_ACTIONS_FIELD_NUMBER: _ClassVar[int]
    GUMBEL_C_VISIT_FIELD_NUMBER: _ClassVar[int]
    GUMBEL_C_SCALE_FIELD_NUMBER: _ClassVar[int]
    GUMBEL_SCALE_FIELD_NUMBER: _ClassVar[int]
    POLICY_REVISIT_PENALTY_FIELD_NUMBER: _ClassVar[int]
    MEMORY_PROFILE_FIELD_NUMBER: _ClassVar[int]
    ENTROPY_TRIGGER_FIELD_NUMBER: _ClassVar[int]
    PRUNE_LOSSES_FIELD_NUMBER: _ClassVar[int]
    TIME_BUDGET_S_FIELD_NUMBER: _ClassVar[int]
    EXPLORE_EPSILON_FIELD_NUMBER: _ClassVar[int]
    NOVELTY_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    CURIOSITY_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    MEMORY_SIMILAR_SHARE_FIELD_NUMBER: _ClassVar[int]
    STALL_TRIGGER_FIELD_NUMBER: _ClassVar[int]
    num_simulations: int
    c_puct: float
    dirichlet_alpha: float
    dirichlet_weight: float
    rollout_depth: int
    gamma: float
    value_mix: float
    early_stop_fraction: float
    max_children: int
    agent: str
    policy_version: str
    batch_size: int
    seed: int
    widening_k: float
    hierarchical: bool
    transpositions: bool
    widening_alpha: float
    virtual_loss: float
    unvisited_parent: bool
    unvisited_value: float
    normalize_q: bool
    max_depth: int
    prefetch_children: int
    noop_penalty: float
    revisit_penalty: float
    memory_weight: float
    memory_limit: int
    policy_value_mix: float
    algorithm: str
    gumbel_max_actions: int
    gumbel_c_visit: float
    gumbel_c_scale: float
    gumbel_scale: float
    policy_revisit_penalty: float
    memory_profile: str
    entropy_trigger: float
    prune_losses: bool
    time_budget_s: float
    explore_epsilon: float
    novelty_weight: float
    curiosity_weight: float
    memory_similar_share: float
    stall_trigger: int
    def __init__(self, num_simulations: _Optional[int] = ..., c_puct: _Optional[float] = ..., dirichlet_alpha: _Optional[float] = ..., dirichlet_weight: _Optional[float] = ..., rollout_depth: _Optional[int] = ..., gamma: _Optional[float] = ..., value_mix: _Optional[float] = ..., early_stop_fraction: _Optional[float] = ..., max_children: _Optional[int] = ..., agent: _Optional[str] = ..., policy_version: _Optional[str] = ..., batch_size: _Optional[int] = ..., seed: _Optional[int] = ..., widening_k: _Optional[float] = ..., hierarchical: _Optional[bool] = ..., transpositions: _Optional[bool] = ..., widening_alpha: _Optional[float] = ..., virtual_loss: _Optional[float] = ..., unvisited_parent: _Optional[bool] = ..., unvisited_value: _Optional[float] = ..., normalize_q: _Optional[bool] = ..., max_depth: _Optional[int] = ..., prefetch_children: _Optional[int] = ..., noop_penalty: _Optional[float] = ..., revisit_penalty: _Optional[float] = ..., memory_weight: _Optional[float] = ..., memory_limit: _Optional[int] = ..., policy_value_mix: _Optional[float] = ..., algorithm: _Optional[str] = ..., gumbel_max_actions: _Optional[int] = ..., gumbel_c_visit: _Optional[float] = ..., gumbel_c_scale: _Optional[float] = ..., gumbel_scale: _Optional[float] = ..., policy_revisit_penalty: _Optional[float] = ..., memory_profile: _Optional[str] = ..., entropy_trigger: _Optional[float] = ..., prune_losses: _Optional[bool] = ..., time_budget_s: _Optional[float] = ..., explore_epsilon: _Optional[float] = ..., novelty_weight: _Optional[float] = ..., curiosity_weight: _Optional[float] = ..., memory_similar_share: _Optional[float] = ..., stall_trigger: _Optional[int] = ...) -> None: ...

class SearchRequest(_message.Message):
    __slots__ = ("session_id", "config")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    config: SearchConfig
    def __init__(self, session_id: _Optional[str] = ..., config: _Optional[_Union[SearchConfig, _Mapping]] = ...) -> None: ...

class ActionStat(_message.Message):
    __slots__ = ("action", "visits", "q", "prior")
    ACTION_FIELD_NUMBER: _ClassVar[int]
    VISITS_FIELD_NUMBER: _ClassVar[int]
    Q_FIELD_NUMBER: _ClassVar[int]
    PRIOR_FIELD_NUMBER: _ClassVar[int]
    action: str
    visits: int
    q: float
    prior: float
    def __init__(self, action: _Optional[str] = ..., visits: _Optional[int] = ..., q: _Optional[float] = ..., prior: _Optional[float] = ...) -> None: ...

class TreeStats(_message.Message):
    __slots__ = ("simulations", "nodes", "max_depth", "env_steps", "transposition_hits", "early_stopped", "seconds", "timed_out")
    SIMULATIONS_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    MAX_DEPTH_FIELD_NUMBER: _ClassVar[int]
    ENV_STEPS_FIELD_NUMBER: _ClassVar[int]
    TRANSPOSITION_HITS_FIELD_NUMBER: _ClassVar[int]
    EARLY_STOPPED_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    simulations: int
    nodes: int
    max_depth: int
    env_steps: int
    transposition_hits: int
    early_stopped: bool
    seconds: float
    timed_out: bool
    def __init__(self, simulations: _Optional[int] = ..., nodes: _Optional[int] = ..., max_depth: _Optional[int] = ..., env_steps: _Optional[int] = ..., transposition_hits: _Optional[int] = ..., early_stopped: _Optional[bool] = ..., seconds: _Optional[float] = ..., timed_out: _Optional[bool] = ...) -> None: ...

class SearchReply(_message.Message):
    __slots__ = ("action", "root", "root_value", "stats")
    ACTION_FIELD_NUMBER: _ClassVar[int]
    ROOT_FIELD_NUMBER: _ClassVar[int]
    ROOT_VALUE_FIELD_NUMBER: _ClassVar[int]
    STATS_FIELD_NUMBER: _ClassVar[int]
    action: str
    root: _containers.RepeatedCompositeFieldContainer[ActionStat]
    root_value: float
    stats: TreeStats
    def __init__(self, action: _Optional[str] = ..., root: _Optional[_Iterable[_Union[ActionStat, _Mapping]]] = ..., root_value: _Optional[float] = ..., stats: _Optional[_Union[TreeStats, _Mapping]] = ...) -> None: ...

class PlayEpisodeRequest(_message.Message):
    __slots__ = ("env_spec", "seed", "fold", "max_steps", "config", "episode_id", "shadow_policy_version", "workflow_id")
    ENV_SPEC_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    FOLD_FIELD_NUMBER: _ClassVar[int]
    MAX_STEPS_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    SHADOW_POLICY_VERSION_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_ID_FIELD_NUMBER: _ClassVar[int]
    env_spec: str
    seed: int
    fold: str
    max_steps: int
    config: SearchConfig
    episode_id: str
    shadow_policy_version: str
    workflow_id: str
    def __init__(self, env_spec: _Optional[str] = ..., seed: _Optional[int] = ..., fold: _Optional[str] = ..., max_steps: _Optional[int] = ..., config: _Optional[_Union[SearchConfig, _Mapping]] = ..., episode_id: _Optional[str] = ..., shadow_policy_version: _Optional[str] = ..., workflow_id: _Optional[str] = ...) -> None: ...

class ShadowDecision(_message.Message):
    __slots__ = ("action", "valid", "value")
    ACTION_FIELD_NUMBER: _ClassVar[int]
    VALID_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    action: str
    valid: bool
    value: float
    def __init__(self, action: _Optional[str] = ..., valid: _Optional[bool] = ..., value: _Optional[float] = ...) -> None: ...

class EpisodeUpdate(_message.Message):
    __slots__ = ("episode_id", "step_index", "action", "observation", "search", "finished", "total_reward", "env_steps", "shadow", "seconds", "planner_seconds", "trace_id", "llm", "exploration", "walks_back")
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_INDEX_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    SEARCH_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    TOTAL_REWARD_FIELD_NUMBER: _ClassVar[int]
    ENV_STEPS_FIELD_NUMBER: _ClassVar[int]
    SHADOW_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    PLANNER_SECONDS_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    LLM_FIELD_NUMBER: _ClassVar[int]
    EXPLORATION_FIELD_NUMBER: _ClassVar[int]
    WALKS_BACK_FIELD_NUMBER: _ClassVar[int]
    episode_id: str
    step_index: int
    action: str
    observation: _common_pb2.Observation
    search: SearchReply
    finished: bool
    total_reward: float
    env_steps: int
    shadow: ShadowDecision
    seconds: float
    planner_seconds: float
    trace_id: str
    llm: _common_pb2.LlmUsage
    exploration: str
    walks_back: int
    def __init__(self, episode_id: _Optional[str] = ..., step_index: _Optional[int] = ..., action: _Optional[str] = ..., observation: _Optional[_Union[_common_pb2.Observation, _Mapping]] = ..., search: _Optional[_Union[SearchReply, _Mapping]] = ..., finished: _Optional[bool] = ..., total_reward: _Optional[float] = ..., env_steps: _Optional[int] = ..., shadow: _Optional[_Union[ShadowDecision, _Mapping]] = ..., seconds: _Optional[float] = ..., planner_seconds: _Optional[float] = ..., trace_id: _Optional[str] = ..., llm: _Optional[_Union[_common_pb2.LlmUsage, _Mapping]] = ..., exploration: _Optional[str] = ..., walks_back: _Optional[int] = ...) -> None: ...
