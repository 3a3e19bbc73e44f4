"""The LLM inside the search against a real HTTP server that speaks the OpenAI chat-completions shape: the
SDK client's cache, concurrency limit, retries and fallbacks; its proposals on a tool task (parsed, checked
against the tools' grammar, judged by the environment); tokens counted into the episode and its memories."""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from evoskill.core.llm import prompt
from evoskill.core.memory.experience import experiences_from_episode
from evoskill.core.memory.fusion import tips_from_memories
from evoskill.core.reward import Scorer
from evoskill.core.search.model import SearchModel
from evoskill.core.search_config import SearchConfig
from evoskill.library.generate import HostSandbox, LocalReward
from evoskill.memory.v1 import memory_pb2
from evoskill.planner.client import llm_usage
from evoskill.planner.episode import EpisodePlayer
from evoskill.planner.llm import LlmAdvisor, LlmClient, Usage, from_settings
from evoskill.planner.search_io import sandbox_simulate
from evoskill.planner.v1 import planner_pb2
from evoskill.platform import metrics
from evoskill.platform.config import LlmSettings, RewardSettings, Settings
from evoskill.sandbox.v1 import sandbox_pb2
from tests.integration import test_metrics
from tests.integration.tools_fixtures import write_tasks

pytestmark = pytest.mark.integration

ACTIONS = ["open door", "go north", "take coin", "look"]
value = test_metrics.value
COMPLETION_TOKENS = 7


@dataclass
class FakeLlm:
    """What the server saw and how it answers: 'coin' (the number of the first action naming `prefer`),
    'script' (`script(prompt)`), '500', 'sleep' (until released), 'garbage' (200 with no JSON). Each answer
    reports as many prompt tokens as the prompt has words; `delay_s` holds every answer that long."""

    mode: str = "coin"
    prefer: str = "coin"
    script: Callable[[str], str] = lambda prompt: ""
    delay_s: float = 0.0
    requests: list[tuple[str, dict[str, str], dict[str, Any]]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    in_flight: int = 0
    most_in_flight: int = 0

    def answer(self, body: dict[str, Any]) -> str:
        prompt = body["messages"][-1]["content"]
        if self.mode == "script":
            return self.script(prompt)
        numbered = re.findall(r"^(\d+)\. (.*)$", prompt, re.MULTILINE)
        number = next(n for n, a in numbered if self.prefer in a)
        return f"{number}, 1"


@pytest.fixture
def llm() -> Iterator[tuple[FakeLlm, str]]:
    fake = FakeLlm()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with fake.lock:
                fake.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                fake.in_flight += 1
                fake.most_in_flight = max(fake.most_in_flight, fake.in_flight)
            try:
                self._answer(body)
            finally:
                with fake.lock:
                    fake.in_flight -= 1

        def _answer(self, body: dict[str, Any]) -> None:
            if fake.delay_s:
                fake.release.wait(fake.delay_s)
            if fake.mode == "sleep":
                fake.release.wait(10)
                return
            if fake.mode == "500":
                self.send_error(500, "model crashed")
                return
            words = len(body["messages"][-1]["content"].split())
            content = b"<html>oops</html>" if fake.mode == "garbage" else json.dumps({
                "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": fake.answer(body)}}],
                "usage": {"prompt_tokens": words, "completion_tokens": COMPLETION_TOKENS,
                          "total_tokens": words + COMPLETION_TOKENS},
            }).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.block_on_close = False
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield fake, f"http://127.0.0.1:{server.server_address[1]}/v1"
    fake.release.set()
    server.shutdown()
    server.server_close()


def memory(action: str, reward: float, success: bool) -> memory_pb2.ScoredExperience:
    return memory_pb2.ScoredExperience(
        experience=memory_pb2.Experience(action=action, reward=reward, success=success), similarity=0.8
    )


def rank_prompt(goal: str = "collect the coin", tips: list[str] | None = None) -> Any:
    return prompt(goal, "You are in a vault. A coin glints.", ACTIONS, tips or [], propose=False)


def test_the_sdk_client_asks_with_the_key_and_counts_the_tokens(
    llm: tuple[FakeLlm, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, url = llm
    monkeypatch.setenv("EVOSKILL_TEST_LLM_KEY", "sk-test-123")
    client = from_settings(Settings(llm=LlmSettings(
        base_url=url + "/", model="qwen-test", api_key_env="EVOSKILL_TEST_LLM_KEY", temperature=0.3, max_tips=2,
        prompt_usd_per_mtok=2.0, completion_usd_per_mtok=10.0)))
    assert client is not None
    tips = tips_from_memories([memory("take coin", 1.0, True), memory("open door", -0.5, False)], limit=10)
    usage = Usage()
    assert client.complete(rank_prompt(tips=tips), usage) == "3, 1"
    path, headers, body = fake.requests[0]
    assert path == "/v1/chat/completions" and headers["authorization"] == "Bearer sk-test-123"
    assert body["model"] == "qwen-test" and body["temperature"] == 0.3
    system, user = body["messages"]
    assert system["role"] == "system" and "numbers" in system["content"]
    assert "collect the coin" in user["content"] and "A coin glints." in user["content"]
    assert all(f"{i}. {a}" in user["content"] for i, a in enumerate(ACTIONS, 1))
    assert "'take coin' was part of an episode that succeeded" in user["content"]
    words = len(user["content"].split())
    assert (usage.requests, usage.prompt_tokens, usage.completion_tokens) == (1, words, COMPLETION_TOKENS)
    assert usage.cost_usd == pytest.approx((2.0 * words + 10.0 * COMPLETION_TOKENS) / 1e6)
    client.close()


def test_a_repeated_prompt_is_answered_from_the_cache_and_the_metrics_count_it(
    llm: tuple[FakeLlm, str], reader: InMemoryMetricReader
) -> None:
    fake, url = llm
    client = LlmClient(LlmSettings(base_url=url, model="m"))
    usage = Usage()
    assert client.complete(rank_prompt(), usage) == client.complete(rank_prompt(), usage) == "3, 1"
    assert len(fake.requests) == 1
    assert (usage.requests, usage.cached, usage.completion_tokens) == (2, 1, COMPLETION_TOKENS)  # tokens once
    assert value(reader, metrics.LLM_REQUESTS, outcome="cached").value == 1
    assert value(reader, metrics.LLM_REQUESTS, outcome="answered").value == 1
    assert value(reader, metrics.LLM_TOKENS, kind="completion").value == COMPLETION_TOKENS
    assert value(reader, metrics.LLM_TOKENS, kind="prompt").value == usage.prompt_tokens
    client.complete(rank_prompt("another goal"), usage)  # another prompt, another request
    assert len(fake.requests) == 2
    client.close()
    uncached = LlmClient(LlmSettings(base_url=url, model="m", cache_size=0))
    uncached.complete(rank_prompt(), usage)
    assert len(fake.requests) == 3
    uncached.close()


def test_requests_in_flight_never_exceed_the_concurrency_limit(llm: tuple[FakeLlm, str]) -> None:
    fake, url = llm
    fake.delay_s = 0.3  # each answer holds its slot a while, so that the searches' threads pile up
    client = LlmClient(LlmSettings(base_url=url, model="m", concurrency=2, timeout_s=10))
    usages = [Usage() for _ in range(6)]
    threads = [threading.Thread(target=client.complete, args=(rank_prompt(f"goal {i}"), usages[i]))
               for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(fake.requests) == 6 and all(u.requests == 1 and not u.failures for u in usages)
    assert fake.most_in_flight == client.most_in_flight == 2
    client.close()


@pytest.mark.parametrize(("mode", "reason"), [("500", "InternalServerError"), ("sleep", "APITimeoutError"),
                                              ("garbage", "")])
def test_a_failing_llm_gives_no_answer_and_says_why(llm: tuple[FakeLlm, str], mode: str, reason: str,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    fake, url = llm
    fake.mode = mode
    client = LlmClient(LlmSettings(base_url=url, model="m", timeout_s=0.5, max_retries=1))
    usage = Usage()
    with caplog.at_level(logging.WARNING, logger="evoskill.planner.llm"):
        assert client.complete(rank_prompt(), usage) is None
    assert (usage.requests, usage.failures, usage.prompt_tokens) == (1, 1, 0)
    assert "gave no answer" in caplog.text and reason in caplog.text
    if mode != "garbage":
        assert len(fake.requests) == 2  # one retry, after the SDK's backoff
    client.close()


def test_an_unreachable_llm_gives_no_answer() -> None:
    client = LlmClient(LlmSettings(base_url="http://127.0.0.1:9/v1", model="m", max_retries=0))
    usage = Usage()
    assert client.complete(rank_prompt(), usage) is None and usage.failures == 1
    client.close()


def tool_task(tmp_path: Path) -> str:
    """A task whose only tool takes two integers nothing names: the environment lists no call of it."""
    path = write_tasks(tmp_path, {"id": "sum", "goal": "What is 2 + 3?", "tools": ["pytools:add"],
                                  "expected_answer": 5})
    return f"tools:{path}"


def add_then_answer(prompt: str) -> str:
    """Proposals a careless model might write: one good call among calls of no tool and bad arguments."""
    if "returned: 5" in prompt:
        return "final_answer(answer=5)"
    return "```\nmultiply(a=2, b=3)\nadd(a='two', b=3)\n- add(a=2, b=3)\nadd(2, 3)\n```"


def play(url: str, env_spec: str, agent: str, max_steps: int, episode_tokens: int = 0,
         value_weight: float = 0.0, rollout_steps: int = 0) -> tuple[list[planner_pb2.EpisodeUpdate], EpisodePlayer]:
    """One episode in-process (the sandbox's host, the reward's function) with the LLM at `url`."""
    client = LlmClient(LlmSettings(base_url=url, model="m", episode_tokens=episode_tokens, value_weight=value_weight,
                                   rollout_steps=rollout_steps))
    sandbox = HostSandbox()
    player = EpisodePlayer(sandbox, LocalReward(Settings()), SearchConfig(), Scorer(RewardSettings()), llm=client)
    request = planner_pb2.PlayEpisodeRequest(env_spec=env_spec, seed=0, fold="train", max_steps=max_steps,
                                             config=planner_pb2.SearchConfig(agent=agent, num_simulations=8))
    try:
        return list(player.play(request)), player
    finally:
        sandbox.close()
        client.close()


@pytest.mark.parametrize("agent", ["llm", "llm+mcts"])
def test_proposals_solve_a_tool_task_and_their_tokens_reach_the_episode(
    llm: tuple[FakeLlm, str], tmp_path: Path, agent: str
) -> None:
    fake, url = llm
    fake.mode, fake.script = "script", add_then_answer
    updates, player = play(url, tool_task(tmp_path), agent, max_steps=4)
    episode = player.completed
    assert [s.action.text for s in episode.steps] == ["add(a=2, b=3)", "final_answer(answer=5)"]
    assert episode.won
    first = episode.steps[0]
    assert "add(a=2, b=3)" in first.target.actions and "add(a=2, b=3)" not in episode.initial.valid_actions
    prompt_text = fake.requests[0][2]["messages"][-1]["content"]
    assert "add(a: integer, b: integer)" in prompt_text  # the tool's signature, from the goal
    assert not any("chance, in percent" in r[2]["messages"][0]["content"] for r in fake.requests)  # value_weight 0
    assert first.llm.requests >= 1 and first.llm.prompt_tokens == len(prompt_text.split())
    assert episode.llm.prompt_tokens == sum(s.llm.prompt_tokens for s in episode.steps) > 0
    assert episode.llm.completion_tokens == COMPLETION_TOKENS * (len(fake.requests))
    assert updates[-1].llm == episode.llm
    assert llm_usage(updates[-1].llm)["prompt_tokens"] == episode.llm.prompt_tokens  # what `eval --json` reports
    (unit, _) = experiences_from_episode(episode)
    assert unit.metadata["llm_prompt_tokens"] == str(first.llm.prompt_tokens)
    assert unit.metadata["llm_completion_tokens"] == str(COMPLETION_TOKENS) and unit.metadata["llm_cost_usd"] == "0"


@pytest.mark.parametrize("agent", ["llm", "llm+mcts"])
def test_an_episode_stops_asking_once_its_token_budget_is_spent(
    llm: tuple[FakeLlm, str], tmp_path: Path, agent: str
) -> None:
    """llm.episode_tokens: the request that crosses the budget is the episode's last. `llm`'s second answer
    needed the LLM, so the episode it won with no bound (the test above) is lost; search finds the answer alone
    (the environment lists it once the call returned 5)."""
    fake, url = llm
    fake.mode, fake.script = "script", add_then_answer
    _, player = play(url, tool_task(tmp_path), agent, max_steps=2, episode_tokens=1)
    first, second = player.completed.steps
    assert first.action.text == "add(a=2, b=3)" and first.llm.requests == len(fake.requests) >= 1
    assert second.llm.requests == 0 and player.completed.llm.requests == first.llm.requests
    assert player.completed.won == (agent == "llm+mcts")

def test_the_agent_falls_back_when_the_llm_names_nothing(llm: tuple[FakeLlm, str], tmp_path: Path,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    fake, url = llm
    fake.mode, fake.script = "script", lambda prompt: "I would rather not say."
    with caplog.at_level(logging.INFO, logger="evoskill.planner"):
        _, player = play(url, tool_task(tmp_path), "llm", max_steps=1)
    (step,) = player.completed.steps
    assert step.action.text == "ask_clarification()"  # the first (and only) candidate the environment lists
    assert step.llm.failures == 1 and "names no usable action" in caplog.text


@contextmanager
def coin_search(url: str, config: SearchConfig, hooks: Callable[[LlmClient, Usage], dict[str, Any]],
                **llm: Any) -> Iterator[tuple[SearchModel, LlmClient, Usage]]:
    """A search model on CoinCollector's test game 1 (the sandbox's host in-process), the LLM at `url` (settings
    `llm`) given to it by `hooks(client, usage)` (propose, judge, rollout_policy); closed after the block."""
    client = LlmClient(LlmSettings(base_url=url, model="m", **llm))
    sandbox = HostSandbox()
    session = sandbox.CreateSession(sandbox_pb2.CreateSessionRequest(env_spec="twx:coin", seed=1, fold="test"))
    usage = Usage()
    try:
        yield (SearchModel(sandbox_simulate(sandbox, session.session_id), Scorer(RewardSettings()), config,
                           **hooks(client, usage)), client, usage)
    finally:
        sandbox.close()
        client.close()


def test_the_environment_judges_free_text_proposals(llm: tuple[FakeLlm, str]) -> None:
    """A text game has no grammar of its own: a new action is free text, and the game refuses what it cannot do."""
    fake, url = llm
    fake.mode, fake.script = "script", lambda prompt: "dance wildly\n1"
    with coin_search(url, SearchConfig(), lambda client, usage: {"propose": LlmAdvisor(client).proposer(usage)},
                     propose_below=100) as (env, _, usage):
        env.root()
    first = env.actions(())[0]  # the first candidate the LLM was shown: no-ops are not shown
    assert env.rejected and env.rejected[0][0] == "dance wildly" and env.proposed[()] == []
    assert env.ranked[()] == [first] and usage.requests == 1


def test_the_llm_judges_the_states_search_evaluates_below_the_root(llm: tuple[FakeLlm, str]) -> None:
    """llm.value_weight: a state's value mixes the LLM's chance of completing the goal, on the scale of a won
    ending's reward; the root is not asked, and an answer with no number leaves the value as it was."""
    fake, url = llm
    fake.mode, fake.script = "script", lambda prompt: "75" if "take coin" in prompt else "I cannot tell."
    win = 2.0
    with coin_search(url, SearchConfig(value_mix=0.0),
                     lambda client, usage: {"judge": LlmAdvisor(client, taken=["take coin"]).judge(usage, win)},
                     value_weight=0.5) as (env, client, usage):
        env.root()
        child = (env.actions(())[0],)
        env._step_paths([child])
        values = env.evaluate([(), child]).values
        (unjudged,) = LlmAdvisor(client).judge(usage, win)(env, [child], np.array([0.25]))
    assert values[0] == 0.0 and values[1] == 0.5 * 0.75 * win  # (1 - w) * 0 + w * 75% * win
    assert unjudged == 0.25 and usage.failures == 1  # no number: the search's own value, a failure counted
    (system, *_), asked = fake.requests[0][2]["messages"], [r[2]["messages"][-1]["content"] for r in fake.requests]
    assert "chance, in percent" in system["content"] and len(asked) == 2 and "- take coin" in asked[0]
    assert usage.requests == 2 and usage.completion_tokens == 2 * COMPLETION_TOKENS


def test_a_batch_of_leaves_is_judged_at_once_within_the_concurrency_limit(llm: tuple[FakeLlm, str]) -> None:
    fake, url = llm
    fake.mode, fake.script, fake.delay_s = "script", lambda prompt: "50", 0.3  # each answer holds its slot a while
    with coin_search(url, SearchConfig(value_mix=0.0),
                     lambda client, usage: {"judge": LlmAdvisor(client).judge(usage, 2.0)},
                     value_weight=1.0, concurrency=2, timeout_s=10) as (env, client, usage):
        env.root()
        leaves = [(a,) for a in env.actions(())] + [(a, b) for a in env.actions(())[:1] for b in ("look around",)]
        env._step_paths(leaves)
        values = env.evaluate(leaves).values
    assert len(leaves) == 3 and values.tolist() == [1.0, 1.0, 1.0]  # 50% of a won ending's 2.0, each
    assert fake.most_in_flight == client.most_in_flight == 2  # asked together, never more than the limit
    assert (usage.requests, usage.completion_tokens) == (3, 3 * COMPLETION_TOKENS)  # each counted, from threads


def test_the_llm_chooses_the_first_steps_of_each_rollout(llm: tuple[FakeLlm, str]) -> None:
    """llm.rollout_steps: a leaf's rollout takes the LLM's first choice among the actions that may change the
    world for that many steps, one request each, and plays on at random for the rest of rollout_depth."""
    fake, url = llm
    fake.mode, fake.script = "script", lambda prompt: "2"
    with coin_search(url, SearchConfig(value_mix=1.0, rollout_depth=4),
                     lambda client, usage: {"rollout_policy": LlmAdvisor(client).rollout_policy(usage)},
                     rollout_steps=2) as (env, _, usage):
        env.root()
        leaf = (env.actions(())[0],)
        env._step_paths([leaf])
        env.evaluate([leaf])
        first = env.rollout_candidates(leaf)[0][1]  # the second shown: the LLM answered "2"
        second = env.rollout_candidates((*leaf, first))[0][1]
        off = LlmClient(LlmSettings(base_url=url, model="m"))
        assert LlmAdvisor(off).rollout_policy(usage) is None  # rollout_steps 0: random rollouts
        assert LlmAdvisor(off).judge(usage, 2.0) is None  # value_weight 0: the leaves' values are the search's own
        off.close()
    assert (*leaf, first, second) in env.nodes  # the LLM's two steps, kept as the search's nodes
    assert len(fake.requests) == usage.requests == 2  # one a step; the last two steps random, no request
    shown = [r[2]["messages"][-1]["content"] for r in fake.requests]
    assert f"2. {first}" in shown[0] and f"2. {second}" in shown[1]


def test_the_leaves_rollouts_ask_the_llm_together_and_value_as_one_at_a_time(llm: tuple[FakeLlm, str]) -> None:
    """A batch of leaves: their guided rollouts' requests in flight at once (rollout_workers, the planner's
    llm.concurrency), the environment stepped one rollout at a time, the same values as in a row."""
    fake, url = llm
    fake.mode, fake.script, fake.delay_s = "script", lambda prompt: "1", 0.5  # each answer holds its slot a while
    values = {}
    for workers in (1, 3):
        with coin_search(url, SearchConfig(value_mix=1.0, rollout_depth=4, seed=5),
                         lambda client, usage, w=workers: {"rollout_policy": LlmAdvisor(client).rollout_policy(usage),
                                                           "rollout_workers": w},
                         rollout_steps=1, concurrency=3, timeout_s=10, cache_size=0) as (env, client, usage):
            env.root()
            leaves = [(a,) for a in env.actions(())] + [(env.actions(())[0], "look around")]
            env._step_paths(leaves)
            values[workers] = env.evaluate(leaves).values.tolist()
        assert usage.requests == len(leaves) == 3 and client.most_in_flight == workers
    assert values[3] == values[1]  # the random parts' seeds given in order, whichever thread ran first


def test_search_asks_the_llm_to_judge_its_leaves_only_where_set(llm: tuple[FakeLlm, str], tmp_path: Path) -> None:
    fake, url = llm
    fake.mode = "script"
    fake.script = lambda prompt: "90" if "Chance of completing" in prompt else add_then_answer(prompt)
    _, player = play(url, tool_task(tmp_path), "llm+mcts", max_steps=4, value_weight=0.5)
    judged = [r for r in fake.requests if "chance, in percent" in r[2]["messages"][0]["content"]]
    assert judged and player.completed.won  # the same episode as with proposals alone, its leaves judged too
    usage = player.completed.llm  # every request counted into the episode, the cache's answers too
    assert usage.requests - usage.cached == len(fake.requests)

def test_an_episode_with_the_llm_as_rollout_policy_asks_it_below_the_leaves_and_wins(
    llm: tuple[FakeLlm, str], tmp_path: Path
) -> None:
    fake, url = llm
    fake.mode, fake.script = "script", add_then_answer
    _, plain = play(url, tool_task(tmp_path), "llm+mcts", max_steps=4)
    asked_plain = len(fake.requests)
    _, guided = play(url, tool_task(tmp_path), "llm+mcts", max_steps=4, rollout_steps=1)
    assert plain.completed.won and guided.completed.won
    assert len(fake.requests) - asked_plain > asked_plain  # the rollouts' requests besides the expansions'
    usage = guided.completed.llm
    assert usage.requests - usage.cached == len(fake.requests) - asked_plain


async def test_the_planner_takes_the_llms_choices_as_priors_and_the_sandbox_judges_its_proposals(
    llm: tuple[FakeLlm, str], settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    """Through the services: a proposal the game refuses (the sandbox's INVALID_ARGUMENT) is dropped, the
    LLM's choice among the listed actions leads the root's priors, and the step carries its tokens."""
    from evoskill.planner.v1 import planner_pb2_grpc
    from evoskill.platform.rpc import channel
    from evoskill.platform.service import start_service
    from tests.integration.test_bus import isolated

    fake, url = llm
    fake.prefer = "move"
    fake.mode = "script"
    fake.script = lambda prompt: f"dance wildly\n{FakeLlm(prefer='move').answer({'messages': [{'content': prompt}]})}"
    settings = isolated(settings).model_copy(update={"llm": LlmSettings(base_url=url, model="tiny",
                                                                        propose_below=100)})
    caplog.set_level(logging.INFO, logger="evoskill.planner")
    running = [await start_service(name, settings) for name in ("sandbox", "reward", "planner")]
    try:
        request = planner_pb2.PlayEpisodeRequest(
            env_spec="twx:coin", seed=1, fold="test", max_steps=1,
            config=planner_pb2.SearchConfig(agent="llm+mcts", num_simulations=4, rollout_depth=2,
                                            dirichlet_weight=0.0, seed=1))
        async with channel(settings.endpoint("planner").target) as ch:
            (first,) = [u async for u in planner_pb2_grpc.PlannerServiceStub(ch).PlayEpisode(request, timeout=120)
                        if u.action]
    finally:
        for service in reversed(running):
            await service.stop()
    assert fake.requests and fake.requests[0][2]["model"] == "tiny"
    assert "one per line" in fake.requests[0][2]["messages"][0]["content"]  # it was asked to propose
    assert "dance wildly" not in [s.action for s in first.search.root]
    assert "the environment refused the proposed action 'dance wildly'" in caplog.text
    favourite = max(first.search.root, key=lambda s: s.prior)
    assert "move" in favourite.action and favourite.prior > min(s.prior for s in first.search.root)
    assert first.llm.requests == 1 and first.llm.prompt_tokens > 0 and first.llm.completion_tokens == COMPLETION_TOKENS


@pytest.mark.parametrize(("rule", "weight"), [("product", 1.0), ("mix", 0.5)])
def test_thetas_and_the_llms_priors_combine_by_the_rule(llm: tuple[FakeLlm, str], rule: str, weight: float) -> None:
    """policy+mcts with an LLM configured: the root's priors are θ's and the LLM's, combined by llm.combine."""
    from evoskill.core.llm import combine, llm_prior
    from tests.unit.test_agents import east_and_west

    fake, url = llm
    fake.prefer = "open"  # a door θ does not care for (it loves walking east and west)
    client = LlmClient(LlmSettings(base_url=url, model="m", combine=rule, prior_weight=weight))  # type: ignore[arg-type]
    sandbox = HostSandbox()
    player = EpisodePlayer(sandbox, LocalReward(Settings()), SearchConfig(), Scorer(RewardSettings()),
                           east_and_west, llm=client)
    request = planner_pb2.PlayEpisodeRequest(
        env_spec="twx:coin", seed=0, fold="train", max_steps=1,
        config=planner_pb2.SearchConfig(agent="policy+mcts", num_simulations=4, dirichlet_weight=0.0, seed=1))
    try:
        (update, *_) = list(player.play(request))
    finally:
        sandbox.close()
        client.close()
    prompt_text = fake.requests[0][2]["messages"][-1]["content"]
    listed = [a for _, a in re.findall(r"^(\d+)\. (.*)$", prompt_text, re.MULTILINE)]
    favourite = next(a for a in listed if "open" in a)
    actions = [s.action for s in update.search.root]
    theta = east_and_west([("", "", actions, [])])[0][0]
    named = [actions.index(a) for a in (favourite, listed[0]) if a in actions]  # the no-ops search dropped: none
    assert named and actions[named[0]] == favourite
    expected = np.exp(combine(theta, llm_prior(named, len(actions)), rule, weight))
    np.testing.assert_allclose([s.prior for s in update.search.root], expected / expected.sum(), rtol=1e-4)
    assert update.llm.requests == 1
