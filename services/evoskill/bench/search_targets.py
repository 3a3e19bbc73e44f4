"""θ's search targets at small budgets: PUCT's visit distribution against Gumbel MuZero's improved policy.

Each real step's root statistics become θ's policy target: the visit distribution for PUCT, the improved
policy softmax(log pi + sigma(completed Q)) for Gumbel (`SearchResult.policy_target`). On small games with a
known best first action, for each algorithm and budget over many search seeds: how often search picks the
best action, the target's mass on it, and the target's entropy over log(actions) (1 = uniform). Code path:
`core.search.search` with Python callbacks, the planner's search defaults (early stop 0.8, root noise for
PUCT; batch 8 as the planner, and 1), no rollouts: leaf values come from the evaluator (0 here, an untrained
value head).

    evoskill bench targets --json docs/figures/search-targets.json
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from evoskill.core.search import Evaluation, Root, SearchConfig, Transition, search
from evoskill.platform.config import Settings
from evoskill.platform.provenance import write_report


@dataclass(frozen=True)
class Combination:
    """Enter `code` one digit of `digits` at a time. `partial`: each digit of a still-correct prefix earns
    1/len(code) (a recipe step's share of the score); else only the whole code earns 1 (a lock). A wrong digit
    spoils the code; the game goes on to len(code) digits. Prior logits: +`hint` on the right digit and
    +`decoy` on the next one (mod digits) at every step: a half-trained θ, misleading when decoy > hint."""

    name: str
    digits: int
    code: tuple[int, ...]
    partial: bool = True
    hint: float = 0.0
    decoy: float = 0.0

    @property
    def best(self) -> int:
        return self.code[0]

    def root(self) -> Root:
        return Root((), self.digits, key=())

    def step(self, state: tuple[int, ...], action: int) -> Transition:
        nxt = (*state, action)
        earned = nxt == self.code[: len(nxt)] if self.partial else nxt == self.code
        reward = (1.0 / len(self.code) if self.partial else 1.0) if earned else 0.0
        return Transition(nxt, reward, len(nxt) == len(self.code), nxt, self.digits)

    def evaluate(self, states: Sequence[tuple[int, ...]]) -> Evaluation:
        logits = np.zeros((len(states), self.digits))
        for row, state in zip(logits, states, strict=True):
            right = self.code[len(state)]
            row[right] += self.hint
            row[(right + 1) % self.digits] += self.decoy
        return Evaluation(logits, np.zeros(len(states)))


GAMES = (
    Combination("lock 3x4", 3, (2, 0, 1, 2), partial=False),  # the search tests' combination lock
    Combination("lock 5x2", 5, (3, 1), partial=False),
    Combination("recipe 30x3", 30, (7, 19, 3)),  # CookingWorld's 25-45 candidates, a few of them progress
    Combination("recipe 30x3, misleading prior", 30, (7, 19, 3), hint=1.0, decoy=1.5),
)


def target(result: Any) -> np.ndarray:
    """What θ is distilled from: the planner's `search_target` rule."""
    return result.policy_target if result.policy_target is not None else result.visit_distribution


# (algorithm, batch size): the planner's PUCT (8 leaves per round under virtual loss), sequential PUCT, and
# Gumbel, whose rounds are its halving levels whatever the batch size.
SEARCHES = (("puct", 8), ("puct", 1), ("gumbel", 8))


def measure(game: Combination, algorithm: str, batch: int, simulations: int, seeds: int) -> dict[str, float]:
    picked, mass, entropy = [], [], []
    for seed in range(seeds):
        config = SearchConfig(num_simulations=simulations, batch_size=batch, seed=seed, algorithm=algorithm)
        result = search(game.root(), game.step, config, game.evaluate)
        probs = target(result)
        picked.append(result.action == game.best)
        mass.append(float(probs[game.best]))
        nonzero = probs[probs > 0]
        entropy.append(float(-(nonzero * np.log(nonzero)).sum() / np.log(game.digits)))
    return {"best_action_rate": float(np.mean(picked)), "target_mass_on_best": float(np.mean(mass)),
            "target_entropy": float(np.mean(entropy))}


def run_targets_bench(json_path: Path | None, budgets: Sequence[int], seeds: int) -> list[dict[str, Any]]:
    rows = []
    for game in GAMES:
        prior = float(np.exp(game.hint) / (game.digits - 2 + np.exp(game.hint) + np.exp(game.decoy)))
        for algorithm, batch in SEARCHES:
            for simulations in budgets:
                rows.append({"game": game.name, "algorithm": algorithm, "batch_size": batch, "simulations": simulations,
                             "prior_on_best": prior, **measure(game, algorithm, batch, simulations, seeds)})
    table = Table(title=f"Search targets ({seeds} search seeds per row)")
    for column in ("game", "search", "sims", "best action", "target on best", "prior on best", "entropy"):
        table.add_column(column)
    for r in rows:
        search_name = "gumbel" if r["algorithm"] == "gumbel" else f"puct, batch {r['batch_size']}"
        table.add_row(str(r["game"]), search_name, str(r["simulations"]), f"{r['best_action_rate']:.0%}",
                      f"{r['target_mass_on_best']:.3f}", f"{r['prior_on_best']:.3f}", f"{r['target_entropy']:.2f}")
    Console().print(table)
    if json_path is not None:
        summary = {"seeds": seeds, "games": [asdict(g) for g in GAMES], "rows": rows}
        write_report(json_path, summary, Settings())
    return rows
