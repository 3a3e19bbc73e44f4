"""The pure parts of safe exploration: parameters, the canary split, the shadow verdict and the decision rules.

Seed 004 §5.2 and §4.3: a new θ first runs in shadow mode (it sees the states the serving policy acts in and
its choices are only recorded), then serves a deterministic share of episodes (the canary), and takes over
only when it is not worse than the serving one by more than a margin; after promotion a watch window keeps
comparing, and a regression rolls it back. Nothing here touches Temporal, gRPC or the clock: the workflow
calls it during replay and the unit tests call it directly.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from scipy import stats

from evoskill.orchestrator.training.logic import EpisodeResult, input_problems

STAGES = ("starting", "shadow", "canary", "promoting", "watch", "rolling back", "done")
OUTCOMES = ("promoted", "rolled_back", "refused", "aborted")


@dataclass
class Thresholds:
    """When a candidate may serve. Margins are how much worse than the baseline it may look and still pass."""

    min_agreement: float = 0.5        # shadow: share of steps where the candidate picks the baseline's action,
    #                                   counted on episodes the baseline won (where its choices were good)
    max_invalid: int = 0              # shadow: candidate picks outside the valid actions, or non-finite values
    success_margin: float = 0.1       # canary: allowed shortfall in success rate
    reward_margin: float = 0.5        # canary: allowed shortfall in mean episode reward
    alpha: float = 0.1                # one-sided level: a shortfall beyond the margin must be significant
    #                                   at this level to count; 0.5 = the point estimates decide alone
    watch_success_margin: float | None = None   # after promotion; None = the canary's margins
    watch_reward_margin: float | None = None


@dataclass
class ExplorationParams:
    candidate: str                    # the version to try, e.g. "v000007"
    envs: list[str]
    baseline: str = ""                # "" = the serving version (or, none promoted, the newest older one)
    shadow_episodes: int = 2
    canary_episodes: int = 4
    canary_fraction: float = 0.5      # share of canary episodes the candidate plays
    watch_episodes: int = 2           # after promotion, played with what the planner serves
    simulations: int = 8
    max_steps: int = 10
    fold: str = "dev"                 # the episodes are evaluations: kept out of the learner's replay
    seed: int = 0
    fold_size: int = 1000
    parallelism: int = 2
    thresholds: Thresholds = field(default_factory=Thresholds)
    heartbeat_timeout_s: float = 60.0
    episode_timeout_s: float = 1800.0


def validate(params: ExplorationParams) -> list[str]:
    """Problems with the parameters, each naming the field; empty when they are usable."""
    t = params.thresholds
    margins = {name: value for name in ("success_margin", "reward_margin", "watch_success_margin",
                                        "watch_reward_margin") if (value := getattr(t, name)) is not None}
    problems = input_problems(
        params.envs, params.seed,
        {"heartbeat_timeout_s": params.heartbeat_timeout_s, "episode_timeout_s": params.episode_timeout_s},
        margins, {"candidate": params.candidate, "baseline": params.baseline})
    if not params.candidate:
        problems.append("candidate: give the policy version to try, e.g. v000007")
    for name in ("simulations", "max_steps", "parallelism", "fold_size"):
        if getattr(params, name) < 1:
            problems.append(f"{name} must be >= 1 (got {getattr(params, name)})")
    for name in ("shadow_episodes", "watch_episodes"):
        if getattr(params, name) < 0:
            problems.append(f"{name} must be >= 0 (got {getattr(params, name)})")
    if params.canary_episodes < 2:
        problems.append(f"canary_episodes must be >= 2: each arm needs an episode (got {params.canary_episodes})")
    if not 0.0 < params.canary_fraction < 1.0:
        problems.append(f"canary_fraction must be in (0, 1) (got {params.canary_fraction})")
    if not 0.0 <= t.min_agreement <= 1.0:
        problems.append(f"min_agreement must be in [0, 1] (got {t.min_agreement})")
    if t.max_invalid < 0:
        problems.append(f"max_invalid must be >= 0 (got {t.max_invalid})")
    if not 0.0 < t.alpha <= 0.5:
        problems.append(f"alpha must be in (0, 0.5] (got {t.alpha})")
    stages = params.shadow_episodes + params.canary_episodes + params.watch_episodes
    if stages > params.fold_size:
        problems.append(f"shadow + canary + watch episodes ({stages}) exceed fold_size ({params.fold_size})")
    return problems


def canary_arms(seed: int, count: int, fraction: float) -> list[bool]:
    """Which canary episodes the candidate plays (True) and which the baseline: round(count x fraction) of
    them, at least one and at most count - 1, at places drawn from `seed` (the same on every replay)."""
    if count < 2:
        raise ValueError(f"a canary needs >= 2 episodes, got {count}")
    share = min(max(round(count * fraction), 1), count - 1)
    chosen = set(random.Random(seed * 7919 + count).sample(range(count), share))
    return [i in chosen for i in range(count)]


# -- figures ------------------------------------------------------------------------------------------------


@dataclass
class ArmFigures:
    """One arm's episodes: how many, how many won, the rewards (for mean and spread)."""

    episodes: int = 0
    wins: int = 0
    rewards: list[float] = field(default_factory=list)

    @property
    def success(self) -> float:
        return self.wins / self.episodes if self.episodes else 0.0

    @property
    def mean_reward(self) -> float:
        return statistics.fmean(self.rewards) if self.rewards else 0.0

    @property
    def reward_var(self) -> float:
        return statistics.variance(self.rewards) if len(self.rewards) > 1 else 0.0


def arm_figures(results: Sequence[EpisodeResult]) -> ArmFigures:
    return ArmFigures(len(results), sum(r.won for r in results), [r.total_reward for r in results])


@dataclass
class ShadowStep:
    """One real step of a shadow episode: the baseline acted, the candidate only said what it would do."""

    baseline_action: str
    candidate_action: str
    valid: bool                       # the candidate's choice is among the state's valid actions
    candidate_value: float            # the candidate's predicted value of the state (its search root value)
    baseline_value: float


@dataclass
class ShadowEpisode:
    episode_id: str
    env: str
    seed: int
    won: bool                         # the baseline's outcome (it acted)
    total_reward: float
    steps: list[ShadowStep] = field(default_factory=list)


@dataclass
class ShadowFigures:
    episodes: int = 0
    baseline_wins: int = 0
    steps: int = 0
    agreements: int = 0
    won_steps: int = 0                # steps of episodes the baseline won
    won_agreements: int = 0
    invalid: int = 0                  # candidate choices outside the valid actions, or non-finite values
    mean_candidate_value: float = 0.0
    mean_baseline_value: float = 0.0

    @property
    def agreement(self) -> float:
        return self.agreements / self.steps if self.steps else 1.0

    @property
    def agreement_on_wins(self) -> float:
        return self.won_agreements / self.won_steps if self.won_steps else 1.0


def shadow_figures(episodes: Sequence[ShadowEpisode]) -> ShadowFigures:
    steps = [(e, s) for e in episodes for s in e.steps]
    finite = [s for _, s in steps if math.isfinite(s.candidate_value)]
    return ShadowFigures(
        episodes=len(episodes), baseline_wins=sum(e.won for e in episodes), steps=len(steps),
        agreements=sum(s.candidate_action == s.baseline_action for _, s in steps),
        won_steps=sum(e.won for e, _ in steps),
        won_agreements=sum(e.won and s.candidate_action == s.baseline_action for e, s in steps),
        invalid=sum(not s.valid or not math.isfinite(s.candidate_value) for _, s in steps),
        mean_candidate_value=statistics.fmean(s.candidate_value for s in finite) if finite else 0.0,
        mean_baseline_value=statistics.fmean(s.baseline_value for _, s in steps) if steps else 0.0)


# -- decisions ----------------------------------------------------------------------------------------------


@dataclass
class Decision:
    passed: bool
    reason: str


def shadow_verdict(figures: ShadowFigures, t: Thresholds) -> Decision:
    """Refuse a candidate that picks invalid actions (or reports non-finite values), or that disagrees with
    the baseline beyond `min_agreement` where the baseline succeeded."""
    if figures.invalid > t.max_invalid:
        return Decision(False, f"shadow: {figures.invalid} invalid or non-finite choices "
                               f"(at most {t.max_invalid} allowed) in {figures.steps} steps")
    if figures.won_steps and figures.agreement_on_wins < t.min_agreement:
        return Decision(False, f"shadow: agreed with the baseline on {figures.agreement_on_wins:.0%} of the "
                               f"{figures.won_steps} steps of won episodes (needs {t.min_agreement:.0%})")
    on_wins = (f"{figures.agreement_on_wins:.0%} where the baseline won" if figures.won_steps
               else "the baseline won no episode")
    return Decision(True, f"shadow: agreement {figures.agreement:.0%} over {figures.steps} steps ({on_wins}), "
                          f"{figures.invalid} invalid")


@dataclass
class Shortfall:
    """How much worse the candidate looks on one metric, and how sure we are it is beyond the margin."""

    metric: str
    shortfall: float                  # baseline - candidate (negative: the candidate is better)
    margin: float
    p_value: float                    # P(a shortfall this large | the true shortfall is exactly the margin)
    regressed: bool


def _success_shortfall(baseline: ArmFigures, candidate: ArmFigures, margin: float, alpha: float) -> Shortfall:
    """One-sided two-proportion z-test of H0 "true shortfall <= margin" against H1 "> margin" at level alpha."""
    pb, pc = baseline.success, candidate.success
    se = math.sqrt(pb * (1 - pb) / baseline.episodes + pc * (1 - pc) / candidate.episodes)
    excess = pb - pc - margin
    # No spread (e.g. both arms always won): the point estimates decide.
    p = (0.0 if excess > 0 else 1.0) if se <= 0.0 else float(stats.norm.sf(excess / se))
    return Shortfall("success", pb - pc, margin, p, excess > 0 and p < alpha)


def _reward_shortfall(baseline: ArmFigures, candidate: ArmFigures, margin: float, alpha: float) -> Shortfall:
    """Welch's one-sided t-test of the same hypotheses on the mean reward (unequal variances: the arms' spreads
    differ), the baseline's mean shifted by the margin."""
    shortfall = baseline.mean_reward - candidate.mean_reward
    excess = shortfall - margin
    if baseline.reward_var <= 0.0 and candidate.reward_var <= 0.0:  # no spread: the point estimates decide
        p = 0.0 if excess > 0 else 1.0
    else:
        p = float(stats.ttest_ind_from_stats(
            baseline.mean_reward - margin, math.sqrt(baseline.reward_var), baseline.episodes,
            candidate.mean_reward, math.sqrt(candidate.reward_var), candidate.episodes,
            equal_var=False, alternative="greater").pvalue)
    return Shortfall("mean_reward", shortfall, margin, p, excess > 0 and p < alpha)


def compare(baseline: ArmFigures, candidate: ArmFigures, success_margin: float, reward_margin: float,
            alpha: float) -> list[Shortfall]:
    """The candidate against the baseline on success rate (two proportions) and mean reward (Welch)."""
    if not baseline.episodes or not candidate.episodes:
        raise ValueError("both arms need at least one episode")
    return [_success_shortfall(baseline, candidate, success_margin, alpha),
            _reward_shortfall(baseline, candidate, reward_margin, alpha)]


def describe(stage: str, baseline: ArmFigures, candidate: ArmFigures, checks: Sequence[Shortfall]) -> str:
    regressed = [c for c in checks if c.regressed]
    verdict = ("regressed on " + ", ".join(f"{c.metric} (short by {c.shortfall:.3g} > margin {c.margin:g}, "
                                           f"p={c.p_value:.3f})" for c in regressed)
               if regressed else "within the margins")
    return (f"{stage}: candidate success {candidate.success:.0%} mean reward {candidate.mean_reward:.3g} "
            f"({candidate.episodes} episodes) vs baseline {baseline.success:.0%} / {baseline.mean_reward:.3g} "
            f"({baseline.episodes}): {verdict}")


def canary_decision(baseline: ArmFigures, candidate: ArmFigures, t: Thresholds) -> Decision:
    """Promote unless the candidate is worse than the baseline by more than a margin (significantly at alpha)."""
    checks = compare(baseline, candidate, t.success_margin, t.reward_margin, t.alpha)
    return Decision(not any(c.regressed for c in checks), describe("canary", baseline, candidate, checks))


def watch_decision(baseline: ArmFigures, promoted: ArmFigures, t: Thresholds) -> Decision:
    """After promotion: keep it unless it regresses below the baseline's canary figures by the watch margins."""
    success = t.success_margin if t.watch_success_margin is None else t.watch_success_margin
    reward = t.reward_margin if t.watch_reward_margin is None else t.watch_reward_margin
    checks = compare(baseline, promoted, success, reward, t.alpha)
    return Decision(not any(c.regressed for c in checks), describe("watch", baseline, promoted, checks))


# -- records ------------------------------------------------------------------------------------------------


@dataclass
class ShadowTask:
    episode_id: str
    env: str
    seed: int
    fold: str
    baseline: str
    candidate: str
    simulations: int
    max_steps: int


@dataclass
class Resolved:
    """The versions an exploration compares, as the learner's registry saw them when it started."""

    candidate: str
    baseline: str
    serving: str                      # promoted version ("" = none: planners serve `latest`)
    latest: str


@dataclass
class ExplorationInput:
    params: ExplorationParams


@dataclass
class ExplorationProgress:
    workflow_id: str
    stage: str
    candidate: str
    baseline: str
    episodes_done: int
    episodes_total: int
    shadow: ShadowFigures | None
    canary_baseline: ArmFigures | None
    canary_candidate: ArmFigures | None
    watch: ArmFigures | None
    decisions: list[str]              # every verdict so far, in order, with its figures
    serving: str                      # what the workflow last set or found serving
    aborting: bool


@dataclass
class ExplorationResult:
    workflow_id: str
    outcome: str                      # one of OUTCOMES
    reason: str
    candidate: str
    baseline: str
    serving: str                      # the version serving when the workflow ended
    shadow: ShadowFigures | None
    canary_baseline: ArmFigures | None
    canary_candidate: ArmFigures | None
    watch: ArmFigures | None
    decisions: list[str]
