"""When the supervisor starts a dead child again: exponential backoff, capped, and giving up after a run of
fast failures (a child that keeps dying at start-up has a cause a restart will not fix: a bad setting, a
broken install). Pure: the supervisor feeds it exits and run times, and it answers with a delay or None."""

from __future__ import annotations

import signal
from dataclasses import dataclass


@dataclass(frozen=True)
class RestartPolicy:
    first_delay_s: float = 0.5
    factor: float = 2.0
    max_delay_s: float = 30.0
    give_up_after: int = 5  # consecutive fast failures
    healthy_after_s: float = 30.0  # a run at least this long was not a fast failure: the count starts again


def describe_exit(returncode: int) -> str:
    """`-9` -> "signal 9 (SIGKILL)", `1` -> "code 1" (Popen's returncode is minus the signal that ended it)."""
    if returncode >= 0:
        return f"code {returncode}"
    try:
        return f"signal {-returncode} ({signal.Signals(-returncode).name})"
    except ValueError:
        return f"signal {-returncode}"


@dataclass
class Restarts:
    """One child's restart history."""

    policy: RestartPolicy
    count: int = 0  # starts after the first
    fast_failures: int = 0  # exits in a row, each within `healthy_after_s` of its start
    last_exit: str = ""
    gave_up: bool = False

    def exited(self, returncode: int, ran_s: float) -> float | None:
        """Seconds to wait before starting the child again, or None: give up (and stay given up)."""
        self.last_exit = describe_exit(returncode)
        if self.gave_up:
            return None
        fast = ran_s < self.policy.healthy_after_s
        self.fast_failures = self.fast_failures + 1 if fast else 0
        if self.fast_failures >= self.policy.give_up_after:
            self.gave_up = True
            return None
        delay = self.policy.first_delay_s * self.policy.factor ** max(self.fast_failures - 1, 0)
        return min(delay, self.policy.max_delay_s)

    def restarted(self) -> None:
        self.count += 1

    @property
    def reason(self) -> str:
        """Why it gave up, in words."""
        return (f"gave up after {self.fast_failures} exits in a row within "
                f"{self.policy.healthy_after_s:g} s of starting (last: {self.last_exit})")
