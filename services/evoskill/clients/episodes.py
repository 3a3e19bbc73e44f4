"""What `evoskill solve` and `evoskill eval` add to the planner's client (evoskill.planner.client): the stack they
play on, the published policies, and the evaluation's report."""

from __future__ import annotations

import statistics
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

from evoskill.planner.client import EpisodeOutcome
from evoskill.platform.config import Settings
from evoskill.platform.rpc import channel, check_health


@dataclass
class EvalReport:
    env: str
    agent: str
    fold: str
    simulations: int
    episodes: list[EpisodeOutcome]
    settings: dict[str, Any] = field(default_factory=dict)
    budget: dict[str, int] = field(default_factory=dict)  # what the command allowed: episodes, simulations, steps
    seeds: list[int] = field(default_factory=list)  # the episodes' seeds, in order
    interrupted: bool = False  # stopped (Ctrl-C) before every seed was played: `episodes` holds those that were

    @property
    def success_rate(self) -> float:
        return sum(e.won for e in self.episodes) / max(len(self.episodes), 1)

    @property
    def mean_score(self) -> float:
        return statistics.fmean(e.score for e in self.episodes) if self.episodes else 0.0

    @property
    def mean_env_steps(self) -> float:
        return statistics.fmean(e.env_steps for e in self.episodes) if self.episodes else 0.0

    @property
    def planner_share(self) -> float:
        """The planner's own share of the episodes' wall time (the rest: the environment, rewards, transport)."""
        total = sum(e.seconds for e in self.episodes)
        return sum(e.planner_seconds for e in self.episodes) / total if total > 0 else 0.0

    @property
    def llm_usage(self) -> dict[str, float]:
        """The LLM's usage summed over the episodes, and its tokens per episode and per step ({} = no LLM asked)."""
        total: dict[str, float] = {}
        for episode in self.episodes:
            for name, value in episode.llm.items():
                total[name] = total.get(name, 0) + value
        if total:
            tokens = total.get("prompt_tokens", 0) + total.get("completion_tokens", 0)
            total["tokens_per_episode"] = tokens / len(self.episodes)
            total["tokens_per_step"] = tokens / max(sum(e.steps for e in self.episodes), 1)
        return total

    def to_json(self) -> dict[str, Any]:
        usage = self.llm_usage
        return {
            "env": self.env, "agent": self.agent, "fold": self.fold, "simulations": self.simulations,
            "success_rate": self.success_rate, "mean_score": self.mean_score, "mean_env_steps": self.mean_env_steps,
            "mean_steps": statistics.fmean(e.steps for e in self.episodes) if self.episodes else 0.0,
            "planner_share": self.planner_share,
            "errors": sum(bool(e.error) for e in self.episodes),
            "explored_steps": sum(sum(e.explored.values()) for e in self.episodes),
            "walks_back": sum(e.walks_back for e in self.episodes),
            **({"llm": usage} if usage else {}),
            "episodes": [asdict(e) for e in self.episodes], "settings": self.settings, "budget": self.budget,
            "seeds": self.seeds, "interrupted": self.interrupted,
        }


async def published_policies(settings: Settings) -> list[str]:
    """The policy versions the learner has published, oldest first (what a planner can be asked to play)."""
    from evoskill.learner.v1 import learner_pb2, learner_pb2_grpc

    async with channel(settings.endpoint("learner").target, settings.grpc) as ch:
        reply = await learner_pb2_grpc.LearnerServiceStub(ch).ListPolicies(learner_pb2.ListPoliciesRequest())
    return [p.version for p in reply.policies]


@asynccontextmanager
async def services(settings: Settings, say: Callable[[str], None]) -> AsyncIterator[Settings]:
    """Use the running stack (waiting while its supervisor restarts a service), else bring the embedded one up
    for the duration of the command; yields the settings to reach it with (the running stack's replicas
    included). A call that finds a service UNAVAILABLE ends in ServiceDown saying what the stack knows of it."""
    from evoskill.stack.running import ServiceDown, live_state, outage, wait_for_stack
    from evoskill.stack.supervisor import Stack, running_settings

    state_dir = settings.state_dir.resolve()
    planner = settings.endpoint("planner").target
    if await wait_for_stack(settings, say) is not None or await check_health(planner, settings=settings.grpc):
        with _explained(lambda: outage(live_state(settings), state_dir), ServiceDown):
            yield running_settings(settings)
        return
    say("no stack is running: starting the embedded stack for this command")
    stack = Stack(settings)
    await stack.start()
    try:
        with _explained(lambda: outage(stack.state(), state_dir), ServiceDown):
            yield stack.settings
    finally:
        stack.stop()


@contextmanager
def _explained(why: Callable[[], str], error: type[Exception]) -> Iterator[None]:
    """An UNAVAILABLE call becomes `error` naming what the stack knows of the outage (`why`), asked at once."""
    import grpc

    try:
        yield
    except grpc.aio.AioRpcError as exc:
        if exc.code() is not grpc.StatusCode.UNAVAILABLE:
            raise
        raise error(f"UNAVAILABLE: {exc.details()} ({why()})") from exc
