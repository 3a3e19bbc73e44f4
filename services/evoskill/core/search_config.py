"""`SearchConfig`: every setting of one search, the one type the settings file (`search.*`), the planner's
request (`planner.v1.SearchConfig`), the search kernels and the search model all use.

The defaults are the product's. The kernels read the tree knobs (PUCT, noise, widening, batching); the
environment model (`core.search.model`) reads the leaf values (`value_mix`, `rollout_depth`), the pruning
and the shaping; the planner reads the advice and the episode length. `from_proto` / `to_proto` are its
one mapping to the wire, where an unset field means "the service's setting".

Outside `core/search` so that reading the settings never loads the numba kernels.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from evoskill.core import limits
from evoskill.core.errors import InvalidInput
from evoskill.planner.v1 import planner_pb2

# Proto fields named and typed like the settings (the rest: `unvisited` below; agent and policy_version
# choose who acts, not how search works).
_PLAIN_FIELDS = (
    "num_simulations", "c_puct", "dirichlet_alpha", "dirichlet_weight", "rollout_depth", "gamma", "value_mix",
    "early_stop_fraction", "max_children", "widening_k", "widening_alpha", "hierarchical", "transpositions",
    "batch_size", "virtual_loss", "normalize_q", "max_depth", "seed", "prefetch_children", "noop_penalty",
    "revisit_penalty", "memory_weight", "memory_limit", "policy_value_mix", "algorithm", "gumbel_max_actions",
    "gumbel_c_visit", "gumbel_c_scale", "gumbel_scale", "policy_revisit_penalty", "memory_profile",
    "entropy_trigger", "prune_losses", "time_budget_s", "explore_epsilon", "novelty_weight",
    "curiosity_weight", "memory_similar_share", "stall_trigger",
)
NOT_ON_THE_WIRE = ("max_episode_steps",)  # a request's PlayEpisodeRequest.max_steps


def _number(value: int | float | str) -> float | None:
    """A setting as a number (environment variables arrive as text); None where it is none."""
    try:
        return float(value)
    except ValueError:
        return None


class InvalidSearchConfig(ValidationError, InvalidInput):
    """A bad search setting. Bad input at a service edge (INVALID_ARGUMENT), and still pydantic's error, so
    that inside `Settings` the message names the setting and its variable."""

    def __str__(self) -> str:
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'search config'}: {e['msg']} "
                         f"(got {limits.shown(e.get('input'))})" for e in self.errors())


class SearchConfig(BaseModel):
    """Seed 000 §4's MCTS parameters (defaults inside the suggested ranges) and the engineering ones.

    PUCT: score(s,a) = Q(s,a) + c_puct * P(s,a) * sqrt(N(s)) / (1 + N(s,a)), with N(s) the node's visit
    count (the expansion counts as one visit, as in mctx) and Q(s,a) = r(s,a) + gamma * V(child).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    def __init__(self, **settings: Any) -> None:
        try:
            super().__init__(**settings)
        except ValidationError as error:
            details: list[Any] = error.errors()  # ErrorDetails carry every key InitErrorDetails needs
            raise InvalidSearchConfig.from_exception_data(error.title, details) from None

    num_simulations: int = Field(64, ge=1, le=100_000, description="Simulations per real step (seed range 50-2000)")
    c_puct: float = Field(1.414, ge=0.0, description="Exploration weight of PUCT (1.0-2.5)")
    dirichlet_alpha: float = Field(0.3, ge=0.0, description="Dirichlet noise concentration at the root")
    dirichlet_weight: float = Field(
        0.25, ge=0.0, le=1.0, description="Share of the root prior replaced by noise (0 = no noise)"
    )
    rollout_depth: int = Field(10, ge=0, le=limits.MAX_ROLLOUT,
                               description="Steps of a rollout from a leaf (5-20; 0 = no rollouts)")
    gamma: float = Field(0.97, ge=0.0, le=1.0, description="Discount factor (0.95-0.99)")
    value_mix: float = Field(
        1.0, ge=0.0, le=1.0,
        description="Leaf value = (1-mix)*value network + mix*rollout return (1 = rollouts only, no θ needed)",
    )
    policy_value_mix: float = Field(
        0.5, ge=0.0, le=1.0,
        description="value_mix of the policy+mcts agent, whose θ has a value head (a request's value_mix wins)",
    )
    early_stop_fraction: float | None = Field(
        0.8, gt=0.0, description="Stop when one root action holds this share of visits (1 or null = never)"
    )
    max_children: int | None = Field(None, ge=1, description="Hard cap on children considered per node (0 = off)")
    widening_k: float | None = Field(
        None, gt=0.0, description="Progressive widening: consider ceil(k*N^alpha) children (0 = off)"
    )
    widening_alpha: float = Field(0.5, description="Progressive widening exponent")
    hierarchical: bool = Field(False, description="Template-first expansion: pick a skill, then its arguments")
    transpositions: bool = Field(True, description="Share nodes reached by different paths to the same state")
    batch_size: int = Field(8, ge=1, le=4096, description="Leaves evaluated together under virtual loss")
    virtual_loss: float = Field(1.0, description="Each in-flight visit counts as returning -virtual_loss (Q units)")
    unvisited_q: Literal["parent"] | float = Field(
        "parent", description="Q of unvisited children: 'parent' (the parent's value) or a constant"
    )
    normalize_q: bool = Field(True, description="Min-max normalise Q over the search (MuZero's MinMaxStats)")
    max_depth: int = Field(64, ge=1, le=limits.MAX_PATH,
                           description="Selection stops at this depth (guards cycles through transpositions)")
    seed: int = Field(0, ge=0, description="Noise and rollout seed (episodes derive one per real step)")
    prefetch_children: int = Field(
        32, ge=0,
        description="Step all children of a new node in one sandbox call when it has at most this many actions; "
        "search then drops the actions that change nothing",
    )
    noop_penalty: float = Field(1.0, description="Search-time cost of an action that changes nothing (a dead end)")
    prune_losses: bool = Field(
        True, description="Search drops a stepped child that ends the episode lost at once (done, not won, no score "
        "gained) while another candidate remains: in a deterministic world its outcome is known, and at a small "
        "budget under virtual loss the prior's favourite can take every visit before its loss is backed up; the "
        "real step never takes one either (its action is stepped first where search did not). θ alone keeps them "
        "(it is θ's choice, not a lookahead's)",
    )
    revisit_penalty: float = Field(
        0.5, description="Search-time cost of an edge into a state the episode or the path has already visited"
    )
    policy_revisit_penalty: float = Field(
        1.0, ge=0.0,
        description="θ alone (agent policy): subtracted from a candidate's logit once per earlier visit to the state "
        "it leads to; a greedy θ otherwise walks between two rooms until the step limit (0 = plain argmax)",
    )
    entropy_trigger: float = Field(
        0.0, ge=0.0, le=1.0,
        description="policy+mcts searches a step only where θ is unsure: the root's prior (θ with its advice) has at "
        "least this normalised entropy H/log(n), 0..1; below it, it acts on that prior's argmax as θ alone does, "
        "stepping nothing but the root's children (seed 004 §4.1; 0 = search every step)",
    )
    stall_trigger: int = Field(
        0, ge=0, le=limits.MAX_EPISODE_STEPS,
        description="With entropy_trigger: policy+mcts also searches every step once the episode has gone this many "
        "real steps without its score rising, however sure θ is: a θ sure of a loop (\"wait\", \"look around\", "
        "\"wait\") is sure where it is wrong, and only a lookahead shows it what else leads anywhere (0 = off)",
    )
    explore_epsilon: float = Field(
        0.0, ge=0.0, le=1.0,
        description="Each real step, with this probability, a uniformly random candidate replaces the agent's choice "
        "(ε-greedy on top of the base policy, seed 004 §4; recorded as the step's exploration; 0 = off)",
    )
    novelty_weight: float = Field(
        0.0, ge=0.0,
        description="Count-based novelty (seed 004 §4.2): a candidate gets weight/(count+1) of logit, count = the "
        "episode's visits to where it leads, or the times it was taken in this state (θ alone and the search root; "
        "0 = off)",
    )
    curiosity_weight: float = Field(
        0.0, ge=0.0,
        description="Curiosity from learned dynamics (seed 000 §5.3): search adds weight × the surprise of θ's "
        "dynamics model (its relative prediction error, in [0, 1)) to the edge reward of each stepped child, as an "
        "intrinsic reward; needs a θ published with one (0 or none = off)",
    )
    memory_weight: float = Field(
        0.0, description="Root logit bonus from experiences retrieved for the state (0 = no retrieval)"
    )
    memory_similar_share: float = Field(
        0.3, ge=0.0, le=1.0,
        description="Weight of the memories of other situations (other tasks of the family, other states) beside this "
        "task's own memories of this very state, which vote in full (core/memory/fusion.py; 1 = every memory alike)",
    )
    memory_limit: int = Field(8, ge=0, le=limits.MAX_RETRIEVE,
                              description="Experiences retrieved per real step when memory_weight > 0")
    memory_profile: str = Field(
        "", description="Retrieval profile of those experiences (memory.profiles: stable, exploratory); "
        "empty = memory.profile"
    )
    max_episode_steps: int = Field(50, ge=1, le=limits.MAX_EPISODE_STEPS,
                                   description="Real steps before an episode is cut off")
    time_budget_s: float = Field(
        0.0, ge=0.0, description="Wall time one real step's search may take (seconds): its sandbox calls are given "
        "what is left as their deadline, the sandbox answers the probes it has time for, and the step acts on what "
        "search found by then (θ's prior where it found nothing); 0 = each call has the client's default deadline",
    )
    algorithm: Literal["puct", "gumbel"] = Field(
        "puct", description="puct, or gumbel: Gumbel MuZero (core/search/gumbel.py), whose improved policy, not "
        "its visit counts, is θ's target; the PUCT knobs (c_puct, noise, early stop, widening, template-first, "
        "batch_size: a halving level is one batch) do not apply to it",
    )
    gumbel_max_actions: int = Field(16, ge=1, le=limits.MAX_ITEMS,
                                    description="Gumbel: root actions sampled for sequential halving")
    gumbel_c_visit: float = Field(
        50.0, ge=0.0, description="Gumbel: sigma(q) = (c_visit + max N) * c_scale * q, q min-max normalised"
    )
    gumbel_c_scale: float = Field(0.1, gt=0.0, description="Gumbel: see gumbel_c_visit")
    gumbel_scale: float = Field(
        1.0, ge=0.0, description="Gumbel: scale of the root's Gumbel noise (0 = the top actions by prior)"
    )

    @field_validator("max_children", "widening_k", mode="before")
    @classmethod
    def _zero_is_off(cls, value: Any) -> Any:
        return None if isinstance(value, int | float | str) and _number(value) == 0 else value

    @field_validator("early_stop_fraction", mode="before")
    @classmethod
    def _whole_budget_is_off(cls, value: Any) -> Any:
        # A fraction of 1 never stops early (the leader cannot be sure before the last simulation).
        number = _number(value) if isinstance(value, int | float | str) else None
        return None if number is not None and number >= 1.0 else value

    @model_validator(mode="after")
    def _noise_needs_concentration(self) -> SearchConfig:
        if self.dirichlet_weight > 0 and self.dirichlet_alpha <= 0:
            raise ValueError("dirichlet_alpha must be > 0 while dirichlet_weight > 0")
        return self

    def with_seed(self, seed: int) -> SearchConfig:
        return self.model_copy(update={"seed": seed})

    @classmethod
    def from_proto(cls, message: planner_pb2.SearchConfig, base: SearchConfig) -> SearchConfig:
        """`base` with the message's set fields; a bad value fails naming the field."""
        fields: dict[str, Any] = {name: getattr(message, name) for name in _PLAIN_FIELDS if message.HasField(name)}
        unvisited = message.WhichOneof("unvisited")
        if unvisited is not None:
            fields["unvisited_q"] = "parent" if unvisited == "unvisited_parent" else message.unvisited_value
        return cls(**{**base.model_dump(), **fields})

    def to_proto(self) -> planner_pb2.SearchConfig:
        """Every field set (off = 0, as the proto documents), so the receiver's settings do not show through."""
        fields = {name: getattr(self, name) for name in _PLAIN_FIELDS}
        fields["early_stop_fraction"] = self.early_stop_fraction or 1.0
        fields["max_children"] = self.max_children or 0
        fields["widening_k"] = self.widening_k or 0.0
        if isinstance(self.unvisited_q, str):
            fields["unvisited_parent"] = True
        else:
            fields["unvisited_value"] = self.unvisited_q
        return planner_pb2.SearchConfig(**fields)
