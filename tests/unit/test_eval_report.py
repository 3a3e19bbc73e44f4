"""The evaluation's report: the LLM's usage summed over the episodes, so two agents compare at a token budget."""

from __future__ import annotations

from evoskill.clients.episodes import EvalReport
from evoskill.common.v1 import common_pb2
from evoskill.planner.client import EpisodeOutcome, llm_usage


def outcome(steps: int, usage: common_pb2.LlmUsage) -> EpisodeOutcome:
    return EpisodeOutcome(0, False, 0.0, steps, steps, 0.0, llm=llm_usage(usage))


def test_the_report_sums_the_llms_usage_and_gives_tokens_per_episode_and_step() -> None:
    report = EvalReport("tools:x", "llm", "test", 0, [
        outcome(2, common_pb2.LlmUsage(requests=2, cached=1, prompt_tokens=300, completion_tokens=20)),
        outcome(3, common_pb2.LlmUsage(requests=3, failures=1, prompt_tokens=500, completion_tokens=30)),
    ])
    usage = report.to_json()["llm"]
    assert (usage["requests"], usage["cached"], usage["failures"]) == (5, 1, 1)
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (800, 50)
    assert usage["tokens_per_episode"] == 425 and usage["tokens_per_step"] == 170


def test_an_episode_that_asked_no_llm_reports_no_usage() -> None:
    assert llm_usage(common_pb2.LlmUsage()) == {}
    assert "llm" not in EvalReport("tools:x", "mcts", "test", 8, [outcome(2, common_pb2.LlmUsage())]).to_json()
