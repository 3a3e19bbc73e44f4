"""The quality suites of `evoskill bench quality` (issue 11), as data: each environment with its budget, full
and `--quick`.

The test fold is never trained or tuned on: the library holds train-fold gold paths only, the online
epochs play train-fold games and evaluate on dev, and the agents are measured on the test fold.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from evoskill.core.agent import AgentKind
from evoskill.envs.registry import parse_spec
from evoskill.envs.schemes import SCIWORLD
from evoskill.orchestrator.training.logic import SEARCH_ALGORITHMS

AGENTS = (AgentKind.RANDOM, AgentKind.MCTS, AgentKind.POLICY_MCTS, AgentKind.POLICY)  # the table's rows, as played
TRAIN_SEARCHES = tuple(a for a in SEARCH_ALGORITHMS if a)  # the online epochs' search (Budget.train_search)


@dataclass(frozen=True)
class Budget:
    library_episodes: int  # train-fold gold paths in the offline library (seeds 0..N-1)
    gradient_steps: int  # learner Train steps on the library (behaviour cloning)
    test_episodes: int  # test-fold games per agent (seeds 0..N-1)
    max_steps: int  # real steps per test game at most
    simulations: int  # of θ + MCTS and of the uniform-prior MCTS it is compared with
    wall_time_s: float  # what the whole run (every seed, every agent) may take on the 2-core machine
    batch_size: int = 0  # 0 = learner.batch_size
    online_epochs: int = 0  # TrainingWorkflow epochs of search after the library (0 = none)
    episodes_per_epoch: int = 8
    train_fold_size: int = 0  # the online epochs play train-fold seeds 0..N-1 (0: `evoskill train`'s default)
    train_simulations: int = 8  # search of the online epochs
    # Gumbel's improved policy stays sharp at 8 simulations where PUCT's visit counts are near-uniform over
    # 40-76 candidates (docs/results.md, "θ's targets at small budgets"): distilling those flattened cloned θ.
    train_search: str = "gumbel"
    train_eval_episodes: int = 10  # dev games θ alone plays after each online epoch: keep_best's evidence
    parallel: int = 2  # test games played at once
    # Early stopping on the dev fold: θ after this many cloning steps and θ at the end each play the
    # train_eval_episodes dev games alone, and the better serves (0 = none: the end's θ). The cloning's best length
    # differs by task (docs/results.md, "300 cloning steps at three seeds"); the dev fold picks it, not the test.
    dev_check_steps: int = 0
    shorten_library: int = 0  # 1: the gold paths without their detours (`evoskill demos --shorten`)

    def train_args(self, env: str, policy: str, seed: int, epochs: int = 0, train_steps: int = 0) -> list[str]:
        """`evoskill train` arguments of the online epochs, starting from θ `policy` ("" = a fresh θ); `epochs`
        and `train_steps` (learner steps per epoch) replace the budget's where given."""
        return ["--env", env, "--policy", policy, "--seed", str(seed), "--epochs", str(epochs or self.online_epochs),
                "--episodes-per-epoch", str(self.episodes_per_epoch), "--eval-start", "--eval-agent", "policy",
                "--eval-episodes", str(self.train_eval_episodes), "--search-algorithm", self.train_search,
                "--simulations", str(self.train_simulations), "--max-steps", str(self.max_steps),
                "--train-steps", str(train_steps or self.online_train_steps), "--batch-size", str(self.batch_size),
                *(["--fold-size", str(self.train_fold_size)] if self.train_fold_size else [])]

    @property
    def online_train_steps(self) -> int:
        """Learner steps of each online epoch."""
        return max(self.gradient_steps // 10, 1)

    def describe(self) -> str:
        seeds = f" (train seeds 0-{self.train_fold_size - 1})" if self.train_fold_size else ""
        online = (f", then {self.online_epochs} online epochs × {self.episodes_per_epoch} games{seeds} at "
                  f"{self.train_simulations} simulations") if self.online_epochs else ""
        check = (f" (θ at {self.dev_check_steps} and at the end played on {self.train_eval_episodes} dev games, "
                 f"the better serving)") if 0 < self.dev_check_steps < self.gradient_steps else ""
        paths = "gold paths, shortened" if self.shorten_library else "gold paths"
        return (f"library {self.library_episodes} {paths}, {self.gradient_steps} gradient steps{check}{online}; "
                f"{self.test_episodes} test games ≤ {self.max_steps} steps, {self.simulations} simulations; "
                f"wall time budget {self.wall_time_s / 60:.0f} min")


@dataclass(frozen=True)
class Suite:
    name: str
    env: str
    budget: Budget
    quick: Budget
    note: str = ""
    settings: tuple[str, ...] = ()  # `group.name=value` the suite's processes run with (a --set of the same wins)

    def pick(self, quick: bool) -> Budget:
        return self.quick if quick else self.budget

    def to_json(self, quick: bool) -> dict[str, Any]:
        return {"name": self.name, "env": self.env, "quick": quick, "note": self.note,
                "budget": asdict(self.pick(quick)), "settings": list(self.settings)}


COOKING_EASY = ("twx:cookingworld?numLocations=1,numIngredients=2,numDistractorItems=3,includeDoors=0,"
                "limitInventorySize=0")
# 300 gold paths and 1000 steps of cloning: θ alone won every CookingWorld-1-room and CoinCollector test game
# (docs/results.md); more costs library and training time on 2 cores without room to gain there.
_TWX = Budget(library_episodes=300, gradient_steps=1000, test_episodes=20, max_steps=50, simulations=32,
              wall_time_s=3600)
_QUICK = Budget(library_episodes=40, gradient_steps=100, test_episodes=3, max_steps=30, simulations=4,
                wall_time_s=300)
_TW = replace(_TWX, library_episodes=200)  # tw-make builds each game once (seconds a game), then caches it
# BFCL's multi-turn categories: the library is the possible answers of every train entry (120 of a category's 200:
# more seeds would only repeat them), 8 simulations as on ScienceWorld (a step enumerates tens to hundreds of
# calls), 40 steps (3-6 turns of a few calls each). docs/bfcl.md measured it.
_BFCL = replace(_TWX, library_episodes=120, max_steps=40, simulations=8)
# EMPO²'s ScienceWorld protocol: the first 5 train variations (the library's, and the only ones online epochs
# play), the first 20 test variations, step cap 30.
_SW = Budget(library_episodes=5, gradient_steps=1000, test_episodes=20, max_steps=30, simulations=8, wall_time_s=720,
             episodes_per_epoch=5, train_fold_size=5)
_SW_QUICK = replace(_QUICK, library_episodes=2, test_episodes=2, episodes_per_epoch=2, train_fold_size=5)
_SW_STEP_CAPS = {"boil": 100, "measure-melting-point-known-substance": 120, "grow-plant": 60, "chemistry-mix": 60}
SCIENCEWORLD_TASKS = ("boil", "measure-melting-point-known-substance",
                      "power-component-renewable-vs-nonrenewable-energy", "find-animal", "grow-plant", "chemistry-mix",
                      "lifespan-shortest-lived", "identify-life-stages-1", "inclined-plane-determine-angle",
                      "mendelian-genetics-known-plant")
# ScienceWorld's search settings (no child stepped ahead, 5 s of search a real step: `EnvScheme.search`), which
# its games get anyway, named in the suite so that its runs record them.
_SW_SETTINGS = tuple(f"search.{name}={value}" for name, value in SCIWORLD.search)
_SW_NOTE = ("success = done with score > 70 on ScienceWorld's own scale; anchors (mean over the 10 tasks): "
            "EMPO² 75.9, GRPO 33.2, Reflexion 17.1, DRRN 17")


def _scienceworld(name: str, env: str, task: str) -> Suite:
    """EMPO²'s protocol for one ScienceWorld task (its step cap by the task's name)."""
    return Suite(name, env, replace(_SW, max_steps=_SW_STEP_CAPS.get(task, 30)), _SW_QUICK, _SW_NOTE, _SW_SETTINGS)


SUITES: dict[str, Suite] = {s.name: s for s in [
    Suite("cooking-easy", COOKING_EASY, _TWX, _QUICK),
    Suite("cooking-hard", "twx:cookingworld", replace(_TWX, max_steps=80), _QUICK),
    Suite("coin", "twx:coin", _TWX, _QUICK),
    Suite("simonsays", "twx:simonsays", _TWX, _QUICK),
    Suite("peckingorder", "twx:peckingorder", _TWX, _QUICK),
    Suite("tw-treasure-hunter", "tw:tw-treasure_hunter?level=10", _TW, _QUICK),
    Suite("tw-simple", "tw:tw-simple?rewards=balanced,goal=detailed", _TW, _QUICK),
    *(_scienceworld(f"scienceworld-{task}", f"sciworld:{task}?easy=1", task) for task in SCIENCEWORLD_TASKS),
]}


def resolve(name: str | None, env: str | None) -> Suite:
    """The suite `name`, on `env` where given (the same protocol and budget); `env` alone takes its family's
    protocol: a ScienceWorld task EMPO²'s (with its search settings), a TextWorld game the TextWorld suites', a
    BFCL category its train entries' answers, anything else the TextWorldExpress suites'."""
    if name is None:
        if not env:
            raise ValueError("give --suite NAME or --env SPEC")
        spec = parse_spec(env, validate=False)
        if spec.scheme == "sciworld":
            return _scienceworld(f"custom:{env}", env, spec.name)
        family = {"tw": _TW, "bfcl": _BFCL}.get(spec.scheme, _TWX)
        return Suite(f"custom:{env}", env, family, _QUICK)
    suite = SUITES.get(name)
    if suite is None:
        raise ValueError(f"unknown suite {name!r}; suites: {', '.join(SUITES)}")
    return replace(suite, env=env) if env else suite


def with_budget(suite: Suite, quick: bool, pairs: list[str]) -> Suite:
    """`suite` with the budget it runs (full or quick) changed by `name=value` pairs (`simulations=8`); the
    summary records the budget that ran, so a smaller run never passes for the suite's own."""
    budget = suite.pick(quick)
    types = {f.name: f.type for f in fields(Budget)}
    changes: dict[str, Any] = {}
    for pair in pairs:
        name, eq, value = pair.partition("=")
        if not eq or name not in types:
            raise ValueError(f"--budget {pair!r}: expected name=value with a name among {', '.join(types)}")
        if types[name] in (str, "str"):
            if value not in TRAIN_SEARCHES:
                raise ValueError(f"--budget {pair!r}: expected one of {', '.join(TRAIN_SEARCHES)}")
            changes[name] = value
            continue
        try:
            changes[name] = float(value) if types[name] in (float, "float") else int(value)
        except ValueError:
            raise ValueError(f"--budget {pair!r}: {value!r} is not a number") from None
        if changes[name] < 0:
            raise ValueError(f"--budget {pair!r}: must not be negative")
    changed = replace(budget, **changes)
    return replace(suite, quick=changed) if quick else replace(suite, budget=changed)
