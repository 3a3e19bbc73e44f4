"""Tower of Hanoi as a text game with a Gymnasium-style API (no evoskill, no gymnasium import).

Three pegs (left, middle, right) and ``disks`` disks, 1 the smallest. Move one top disk at a time,
never onto a smaller one, until every disk is on the right peg. The seed draws the starting position
(each disk on a random peg; ``start="classic"``: all on the left). The score is the number of disks
already in their final place, from the bottom of the right peg up, out of ``disks``.
"""

from __future__ import annotations

import random
from typing import Any

PEGS = ("left", "middle", "right")
TARGET = 2  # the right peg


class TowerOfHanoi:
    """``reset(seed=, options=) -> (text, info)``; ``step(action) -> (text, reward, terminated, truncated, info)``."""

    def __init__(self, disks: int = 3, start: str = "random") -> None:
        if not 1 <= disks <= 8:
            raise ValueError(f"disks must be 1 to 8, got {disks}")
        if start not in ("random", "classic"):
            raise ValueError(f"start must be random or classic, got {start!r}")
        self.disks, self.start = disks, start
        self.max_score = disks
        self.goal = (f"Move all {disks} disks to the right peg, one top disk at a time, "
                     "never putting a disk on a smaller one.")
        self._pegs: list[list[int]] = [[], [], []]  # bottom to top
        self._start: list[list[int]] = [[], [], []]

    # -- the Gymnasium-style API -------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        rng = random.Random(seed)
        while True:
            on = [0] * self.disks if self.start == "classic" else [rng.randrange(3) for _ in range(self.disks)]
            # place the largest disk first so every peg is sorted bottom to top
            self._pegs = [[d for d in range(self.disks, 0, -1) if on[d - 1] == p] for p in range(3)]
            if self.score() < self.disks:  # never start solved
                break
        self._start = [list(peg) for peg in self._pegs]
        return self._describe("You look at the pegs."), self._info() | {"gold_path": self.gold_path()}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        before = self.score()
        move = self._moves().get(action.strip().lower())
        if move is None:
            return self._describe(f"You cannot {action!r}."), 0.0, False, False, self._info()
        src, dst = move
        disk = self._pegs[src].pop()
        self._pegs[dst].append(disk)
        text = self._describe(f"You move disk {disk} from the {PEGS[src]} peg to the {PEGS[dst]} peg.")
        solved = self.score() == self.disks
        return text, float(self.score() - before), solved, False, self._info() | {"won": solved}

    def close(self) -> None:
        pass

    # -- what evoskill reads besides ----------------------------------------------------------------
    def score(self) -> int:
        """Disks in their final place: the right peg's bottom run of n, n-1, n-2, …"""
        placed = 0
        for disk in self._pegs[TARGET]:
            if disk != self.disks - placed:
                break
            placed += 1
        return placed

    def gold_path(self) -> list[str]:
        """The shortest solution from the start of the episode (the classic recursion, any position)."""
        where = {disk: p for p, peg in enumerate(self._start) for disk in peg}
        moves: list[str] = []

        def solve(disk: int, target: int) -> None:  # disks 1..disk onto target
            if disk == 0:
                return
            if where[disk] == target:
                solve(disk - 1, target)
                return
            spare = 3 - where[disk] - target
            solve(disk - 1, spare)
            moves.append(_action(disk, where[disk], target))
            where[disk] = target
            solve(disk - 1, target)

        solve(self.disks, TARGET)
        return moves

    def _moves(self) -> dict[str, tuple[int, int]]:
        out: dict[str, tuple[int, int]] = {}
        for src, peg in enumerate(self._pegs):
            for dst, other in enumerate(self._pegs):
                if peg and dst != src and (not other or other[-1] > peg[-1]):
                    out[_action(peg[-1], src, dst)] = (src, dst)
        return out

    def _info(self) -> dict[str, Any]:
        return {"valid_actions": sorted(self._moves()), "score": self.score(), "max_score": self.disks,
                "goal": self.goal}

    def _describe(self, feedback: str) -> str:
        pegs = "; ".join(f"{PEGS[p]} peg: {' '.join(map(str, peg)) or 'empty'}" for p, peg in enumerate(self._pegs))
        return f"{feedback} Bottom to top, {pegs}."


def _action(disk: int, src: int, dst: int) -> str:
    return f"move disk {disk} from {PEGS[src]} to {PEGS[dst]}"
