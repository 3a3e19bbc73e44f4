"""The pure parts of the training loop: its inputs and records, task sampling, episode ids, the ES update.

Nothing here touches Temporal, gRPC or the clock, so the workflow can call it during replay and the unit
tests can call it directly. Every random draw comes from `random.Random` seeded by the workflow's seed and
the epoch, never from global state, so a replayed or continued workflow draws the same tasks.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from evoskill.core import limits
from evoskill.core.agent import AgentKind

TUNE_MODES = ("", "es")
# Who plays the held-out games: "" the epoch's own agent (MCTS, guided by θ once there is one); "policy" θ
# alone, greedy (the random agent, θ's uniform prior, before any θ exists).
EVAL_AGENTS = ("", AgentKind.POLICY.value)
# What an epoch does: "start" evaluates the starting agent before any training; "imitation" clones θ on the
# environment's gold paths (the offline library); "search" plays train-fold games, trains on them, evaluates.
STAGES = ("start", "imitation", "search")
SEARCH_ALGORITHMS = ("", "puct", "gumbel")  # "" = the planner's search.algorithm
# Seed 000 §2.3 d: black-box search over the MCTS hyper-parameters, in an unbounded space z.
ES_PARAMS = ("c_puct", "dirichlet_alpha", "dirichlet_weight", "rollout_depth")
ES_START = {"c_puct": 1.414, "dirichlet_alpha": 0.3, "dirichlet_weight": 0.25, "rollout_depth": 10.0}
MAX_SEED = 2**31 - 1  # a workflow's seed: the learner's is derived as seed * 1000 + epoch, within an int64


@dataclass
class TrainingParams:
    envs: list[str]
    epochs: int = 2
    episodes_per_epoch: int = 4
    eval_episodes: int = 2
    simulations: int = 16
    search_algorithm: str = ""        # the run's search: one of SEARCH_ALGORITHMS
    explore_epsilon: float = 0.0      # ε-greedy on the training games (search.explore_epsilon; held-out games: none)
    novelty_weight: float = 0.0       # count-based novelty bonus on the training games (search.novelty_weight)
    curiosity_weight: float = 0.0     # search's bonus for θ's dynamics model's surprise, training games only
    memory_weight: float | None = None  # memory's advice in every game (search.memory_weight); None: the planner's
    entropy_trigger: float | None = None  # every game: search only where θ is unsure (search.entropy_trigger)
    max_steps: int = 20
    train_steps: int = 20
    batch_size: int = 0               # 0 = the learner's learner.batch_size
    parallelism: int = 2              # episodes played at once
    seed: int = 0
    train_fold: str = "train"
    eval_fold: str = "dev"
    fold_size: int = 1000             # train tasks are drawn from seeds [0, fold_size)
    train: bool = True                # False: play and evaluate only (no learner call)
    evaluate_start: bool = False      # epoch 0 evaluates the starting agent on the held-out fold, untrained
    demos: int = 0                    # train-fold gold paths into the offline library, cloned in an imitation epoch
    imitation_steps: int = 0          # behaviour-cloning steps of the imitation epoch (0 = train_steps)
    online_fraction: float | None = None  # share of a search epoch's batches from online episodes (None: learner's)
    eval_agent: str = ""              # one of EVAL_AGENTS
    start_policy: str = ""            # θ the first epoch starts from (e.g. cloned from the library); "" = none
    keep_best: bool = True            # a new θ serves only if its held-out games match the best θ's so far
    tune: str = ""                    # "es": evolve the search hyper-parameters (each epoch is a generation)
    es_population: int = 4            # even: antithetic pairs
    es_sigma: float = 0.3
    es_lr: float = 1.0
    continue_as_new_every: int = 10   # epochs per workflow run before continue-as-new
    heartbeat_timeout_s: float = 60.0
    episode_timeout_s: float = 1800.0
    train_wait_s: float = 60.0        # how long the learner waits for this epoch's episodes to reach replay
    metrics_dir: str = ""             # "" = <state_dir>/train/<workflow id> on the worker


MIN_WAIT_S = 0.001  # timedelta keeps microseconds: a shorter timeout becomes 0, which Temporal refuses


def input_problems(envs: Sequence[str], seed: int, seconds: dict[str, float], numbers: dict[str, float],
                   versions: dict[str, str]) -> list[str]:
    """What a workflow's inputs break of the limits every service edge applies (`core.limits`), each naming
    the field and echoing a bounded prefix: the environment specs (at least one, each within its length), the
    seed, timeouts (finite seconds in [MIN_WAIT_S, MAX_WAIT_S]: Temporal's timedelta raises on NaN or infinity, and a
    workflow task that raises is retried for ever), any other number (finite) and policy versions (ids)."""
    problems = []
    if not envs or not all(envs):
        problems.append("envs: give at least one environment spec, e.g. twx:coin")
    elif len(envs) > limits.MAX_ITEMS:
        problems.append(f"envs has {len(envs)} entries, over the limit of {limits.MAX_ITEMS}")
    elif (longest := max(envs, key=len)) and len(longest) > limits.MAX_SPEC:
        problems.append(f"envs holds a spec of {len(longest)} characters, over the limit of {limits.MAX_SPEC}: "
                        f"{limits.shown(longest)}")
    if not 0 <= seed <= MAX_SEED:
        problems.append(f"seed must be in [0, {MAX_SEED}] (got {limits.shown(seed)})")
    for name, value in seconds.items():
        if not MIN_WAIT_S <= value <= limits.MAX_WAIT_S:  # NaN compares False
            problems.append(f"{name} must be a number of seconds in [{MIN_WAIT_S:g}, {limits.MAX_WAIT_S:g}] "
                            f"(got {limits.shown(value)})")
    for name, number in numbers.items():
        if not (math.isfinite(number) and abs(number) <= limits.MAX_MAGNITUDE):
            problems.append(f"{name} must be a finite number (got {limits.shown(number)})")
    for name, version in versions.items():
        if len(version) > limits.MAX_ID:
            problems.append(f"{name} is {len(version)} characters, over the limit of {limits.MAX_ID}: "
                            f"{limits.shown(version)}")
    return problems


def validate(params: TrainingParams) -> list[str]:
    """Problems with the parameters, each naming the field; empty when they are usable."""
    problems = input_problems(
        params.envs, params.seed,
        {"heartbeat_timeout_s": params.heartbeat_timeout_s, "episode_timeout_s": params.episode_timeout_s,
         "train_wait_s": params.train_wait_s},
        {"es_sigma": params.es_sigma, "es_lr": params.es_lr}, {"start_policy": params.start_policy})
    for name in ("epochs", "episodes_per_epoch", "simulations", "max_steps", "parallelism", "fold_size",
                 "continue_as_new_every"):
        if getattr(params, name) < 1:
            problems.append(f"{name} must be >= 1 (got {getattr(params, name)})")
    for name in ("eval_episodes", "batch_size", "demos", "imitation_steps"):
        if getattr(params, name) < 0:
            problems.append(f"{name} must be >= 0 (got {getattr(params, name)})")
    if params.train and params.train_steps < 1:
        problems.append(f"train_steps must be >= 1 when training (got {params.train_steps})")
    if params.online_fraction is not None and not 0.0 <= params.online_fraction <= 1.0:
        problems.append(f"online_fraction must be in [0, 1] (got {params.online_fraction})")
    if not 0.0 <= params.explore_epsilon <= 1.0:
        problems.append(f"explore_epsilon must be in [0, 1] (got {params.explore_epsilon})")
    if not params.novelty_weight >= 0.0:
        problems.append(f"novelty_weight must be >= 0 (got {params.novelty_weight})")
    if not params.curiosity_weight >= 0.0:
        problems.append(f"curiosity_weight must be >= 0 (got {params.curiosity_weight})")
    if params.memory_weight is not None and not params.memory_weight >= 0.0:
        problems.append(f"memory_weight must be >= 0 (got {params.memory_weight})")
    if params.entropy_trigger is not None and not 0.0 <= params.entropy_trigger <= 1.0:
        problems.append(f"entropy_trigger must be in [0, 1] (got {params.entropy_trigger})")
    if params.search_algorithm not in SEARCH_ALGORITHMS:
        problems.append(f"search_algorithm must be one of {SEARCH_ALGORITHMS} "
                        f"(got {limits.shown(params.search_algorithm)})")
    if params.eval_agent not in EVAL_AGENTS:
        problems.append(f"eval_agent must be one of {EVAL_AGENTS} (got {limits.shown(params.eval_agent)})")
    if params.tune not in TUNE_MODES:
        problems.append(f"tune must be one of {TUNE_MODES} (got {limits.shown(params.tune)})")
    if params.tune == "es" and (params.es_population < 2 or params.es_population % 2):
        problems.append(f"es_population must be even and >= 2 (got {params.es_population})")
    if params.tune == "es" and params.es_sigma <= 0:
        problems.append(f"es_sigma must be > 0 (got {params.es_sigma})")
    if params.episodes_per_epoch > params.fold_size:
        problems.append(f"episodes_per_epoch ({params.episodes_per_epoch}) exceeds fold_size ({params.fold_size})")
    return problems


@dataclass(frozen=True)
class Task:
    env: str
    seed: int


def _rng(seed: int, epoch: int, stream: int) -> random.Random:
    return random.Random((seed * 1_000_003 + epoch) * 101 + stream)


def sample_tasks(envs: Sequence[str], seed: int, epoch: int, count: int, fold_size: int) -> list[Task]:
    """`count` distinct train-fold seeds for this epoch; environments in turn so each gets its share."""
    seeds = _rng(seed, epoch, 0).sample(range(fold_size), count)
    return [Task(envs[(epoch + i) % len(envs)], s) for i, s in enumerate(seeds)]


def demo_tasks(envs: Sequence[str], seed: int, count: int, fold_size: int) -> list[Task]:
    """`count` distinct train-fold seeds to demonstrate (their own random stream: adding demonstrations
    does not change which tasks the epochs play)."""
    seeds = _rng(seed, 0, 1).sample(range(fold_size), min(count, fold_size))
    return [Task(envs[i % len(envs)], s) for i, s in enumerate(seeds)]


def eval_tasks(envs: Sequence[str], count: int) -> list[Task]:
    """The held-out tasks: the same every epoch, so the learning curve compares like with like."""
    return [Task(envs[i % len(envs)], i) for i in range(count)]


def episode_id(workflow_id: str, epoch: int, kind: str, index: int) -> str:
    """Fixed per (workflow, epoch, slot): an activity retried after a crash replays the same episode id."""
    return f"{workflow_id}-e{epoch:04d}-{kind}{index:03d}"


def agent_for(policy_version: str) -> AgentKind:
    """MCTS with uniform priors until a policy exists, then the policy guides the search."""
    return AgentKind.POLICY_MCTS if policy_version else AgentKind.MCTS


def eval_agent_for(eval_agent: str, policy_version: str) -> AgentKind:
    """Who plays the held-out games (see EVAL_AGENTS)."""
    if eval_agent == AgentKind.POLICY:
        return AgentKind.POLICY if policy_version else AgentKind.RANDOM
    return agent_for(policy_version)


def stages(params: TrainingParams) -> list[str]:
    """What each epoch of the run does, epoch 0 first: one epoch numbering for the ids, records and report."""
    return ((["start"] if params.evaluate_start else []) + (["imitation"] if params.demos and params.train else [])
            + ["search"] * params.epochs)


# -- records --------------------------------------------------------------------------------------------


@dataclass
class EpisodeTask:
    episode_id: str
    env: str
    seed: int
    fold: str
    agent: str
    simulations: int
    max_steps: int
    policy_version: str = ""
    search: dict[str, float] = field(default_factory=dict)   # SearchConfig overrides (ES candidates)
    algorithm: str = ""                                      # SearchConfig.algorithm ("" = the planner's)


@dataclass
class EpisodeResult:
    episode_id: str
    env: str
    seed: int
    won: bool
    score: float
    total_reward: float
    steps: int
    env_steps: int


@dataclass
class TrainTask:
    steps: int
    batch_size: int
    seed: int
    episode_ids: list[str]
    wait_seconds: float
    request_id: str = ""  # the learner's idempotency key: a retried Train does not make a second version
    online_fraction: float | None = None  # None: the learner's learner.online_fraction
    from_version: str = ""  # θ the update starts from (the one serving); "" = the learner's θ as it is


@dataclass
class LibraryTask:
    """Gold paths of `tasks` (train fold) for the learner's offline library, played `workers` at a time."""

    tasks: list[Task]
    fold: str
    workers: int


@dataclass
class LibraryResult:
    episodes: int             # gold paths played
    won: int
    steps: int
    stored: int               # new in the library (the others were there from an earlier run: ids are per game)
    library_episodes: int     # the library's size after the import
    library_steps: int


@dataclass
class TrainResult:
    policy_version: str
    losses: dict[str, float]
    samples: int
    note: str = ""            # why no policy came out (training off)


@dataclass
class EpochMetrics:
    epoch: int
    agent: str
    train_episodes: int
    train_mean_reward: float
    train_success: float
    train_mean_score: float
    eval_episodes: int
    eval_success: float
    eval_mean_reward: float
    eval_mean_score: float
    policy_version: str
    losses: dict[str, float] = field(default_factory=dict)
    samples: int = 0
    note: str = ""
    search: dict[str, float] = field(default_factory=dict)   # ES: the generation's mean configuration
    es_fitness: list[float] = field(default_factory=list)
    stage: str = "search"                                    # one of STAGES
    eval_agent: str = ""                                     # who played the held-out games
    library_episodes: int = 0                                # imitation: the offline library's size
    serving_version: str = ""                                # θ serving after the epoch (keep_best may keep an
                                                             # earlier one than policy_version, the one evaluated)


@dataclass
class Standing:
    """A θ and how it did on the held-out games (the same games every epoch, so standings compare)."""

    version: str
    success: float
    score: float


def keeps_serving(best: Standing | None, candidate: Standing) -> bool:
    """Whether the best θ so far goes on serving instead of `candidate`: only when the candidate won fewer of
    the held-out games, or as many with a lower mean score (a tie promotes the newer θ). No standing with a θ
    yet: the candidate serves."""
    if best is None or not best.version:
        return False
    return (candidate.success, candidate.score) < (best.success, best.score)


@dataclass
class TrainingState:
    """What one workflow run hands the next through continue-as-new."""

    epoch: int = 0                                   # the next epoch to play
    episode_ids: list[str] = field(default_factory=list)   # every train episode counted, once each
    eval_episodes: int = 0
    policy_version: str = ""
    history: list[EpochMetrics] = field(default_factory=list)
    paused: bool = False
    stopping: bool = False
    es_mean: list[float] = field(default_factory=list)     # ES mean in z space (ES_PARAMS order)
    es_best: dict[str, float] = field(default_factory=dict)
    es_best_fitness: float | None = None
    best: Standing | None = None                     # keep_best: the best θ evaluated so far


@dataclass
class TrainingInput:
    params: TrainingParams
    state: TrainingState = field(default_factory=TrainingState)


@dataclass
class TrainingProgress:
    workflow_id: str
    epoch: int
    epochs: int
    phase: str
    episodes_played: int
    epoch_episodes_done: int
    epoch_episodes_total: int
    in_flight: int
    mean_reward: float | None
    losses: dict[str, float]
    policy_version: str
    paused: bool
    stopping: bool
    history: list[EpochMetrics]
    stage: str = ""


@dataclass
class TrainingResult:
    workflow_id: str
    epochs_completed: int
    episodes_played: int
    episode_ids: list[str]
    eval_episodes: int
    policy_version: str
    stopped: bool
    history: list[EpochMetrics]
    es_best: dict[str, float] = field(default_factory=dict)
    es_best_fitness: float | None = None


@dataclass
class Summary:
    episodes: int
    mean_reward: float
    success: float
    mean_score: float


def summarise(results: Sequence[EpisodeResult]) -> Summary:
    if not results:
        return Summary(0, 0.0, 0.0, 0.0)
    return Summary(len(results), statistics.fmean(r.total_reward for r in results),
                   sum(r.won for r in results) / len(results), statistics.fmean(r.score for r in results))


# -- evolution strategy -----------------------------------------------------------------------------------


def es_encode(config: dict[str, float]) -> list[float]:
    """Search hyper-parameters -> z: logs for the positive ones, the logit for the noise share."""
    w = min(max(config["dirichlet_weight"], 1e-3), 1 - 1e-3)
    return [math.log(config["c_puct"]), math.log(config["dirichlet_alpha"]), math.log(w / (1 - w)),
            math.log(config["rollout_depth"])]


def es_decode(z: Sequence[float]) -> dict[str, float]:
    """z -> a valid SearchConfig: every point of z space is a usable configuration."""
    c, alpha, w, depth = (min(max(v, -8.0), 8.0) for v in z)
    return {"c_puct": math.exp(c), "dirichlet_alpha": math.exp(alpha), "dirichlet_weight": 1 / (1 + math.exp(-w)),
            "rollout_depth": float(min(max(round(math.exp(depth)), 1), 50))}


def es_perturbations(seed: int, generation: int, population: int, dims: int) -> list[list[float]]:
    """Antithetic pairs of standard normal directions, +e then -e, drawn from the workflow's seed."""
    rng = _rng(seed, generation, 1)
    directions: list[list[float]] = []
    for _ in range(population // 2):
        e = [rng.gauss(0.0, 1.0) for _ in range(dims)]
        directions += [e, [-v for v in e]]
    return directions


def centered_ranks(values: Sequence[float]) -> list[float]:
    """Ranks scaled to [-0.5, 0.5]; ties share their mean rank, so equal fitness moves nothing."""
    n = len(values)
    if n < 2:
        return [0.0] * n
    order = sorted(range(n), key=lambda i: values[i])
    ranks = [0.0] * n
    i = 0
    while i < n:
        j = i
        while j + 1 < n and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2
        i = j + 1
    return [r / (n - 1) - 0.5 for r in ranks]


def es_update(mean: Sequence[float], directions: Sequence[Sequence[float]], fitness: Sequence[float],
              sigma: float, lr: float) -> list[float]:
    """OpenAI-ES step with rank shaping: z += lr * (2/P) * sum(u_i * sigma * e_i).

    With one antithetic pair and lr = 1 the mean moves onto the better of the two candidates.
    """
    if len(directions) != len(fitness) or not directions:
        raise ValueError("one fitness per direction is needed")
    shaped = centered_ranks(fitness)
    scale = lr * 2 / len(directions)
    return [m + scale * sum(u * sigma * e[d] for u, e in zip(shaped, directions, strict=True))
            for d, m in enumerate(mean)]


def es_candidates(mean: Sequence[float], directions: Sequence[Sequence[float]], sigma: float) -> list[list[float]]:
    return [[m + sigma * e for m, e in zip(mean, direction, strict=True)] for direction in directions]
