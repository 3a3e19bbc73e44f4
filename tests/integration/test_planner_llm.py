"""The LLM proposer against a real HTTP server that speaks the OpenAI chat-completions shape."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from evoskill.core.memory.fusion import tips_from_memories
from evoskill.memory.v1 import memory_pb2
from evoskill.planner.llm import LlmProposer, from_settings
from evoskill.platform.config import LlmSettings, Settings

pytestmark = pytest.mark.integration

ACTIONS = ["open door", "go north", "take coin", "look"]


@dataclass
class FakeLlm:
    """What the server saw and how it answers: 'coin' (the number of the action naming a coin), 'text' (that
    action's text), '500', 'sleep' (until released), 'garbage' (200 with no JSON)."""

    mode: str = "coin"
    prefer: str = "coin"  # answers with the first action naming this
    requests: list[tuple[str, dict[str, str], dict[str, Any]]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)

    def answer(self, body: dict[str, Any]) -> str:
        prompt = body["messages"][-1]["content"]
        numbered = re.findall(r"^(\d+)\. (.*)$", prompt, re.MULTILINE)
        number, text = next((n, a) for n, a in numbered if self.prefer in a)
        return text if self.mode == "text" else f"{number}, 1"


@pytest.fixture
def llm() -> Iterator[tuple[FakeLlm, str]]:
    fake = FakeLlm()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            fake.requests.append((self.path, dict(self.headers.items()), body))
            if fake.mode == "sleep":
                fake.release.wait(10)
                return
            if fake.mode == "500":
                self.send_error(500, "model crashed")
                return
            content = b"<html>oops</html>" if fake.mode == "garbage" else json.dumps({
                "id": "chatcmpl-1", "object": "chat.completion", "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": fake.answer(body)}}],
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


def test_the_llm_ranking_becomes_a_bonus_with_its_choice_first(
    llm: tuple[FakeLlm, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, url = llm
    monkeypatch.setenv("EVOSKILL_TEST_LLM_KEY", "sk-test-123")
    proposer = from_settings(Settings(llm=LlmSettings(
        base_url=url + "/", model="qwen-test", api_key_env="EVOSKILL_TEST_LLM_KEY", prior_weight=2.0,
        temperature=0.3, max_tips=2,
    )))
    assert proposer is not None
    memories = [memory("take coin", 1.0, True), memory("open door", -0.5, False), memory("look", 0.0, False)]
    tips = tips_from_memories(memories, limit=10)
    bonus = proposer.rank("collect the coin", "You are in a vault. A coin glints.", ACTIONS, tips)

    assert bonus.tolist() == pytest.approx([1.0, 0.0, 2.0, 0.0])  # "3, 1": coin first, then open door
    assert proposer.choose("collect the coin", "You are in a vault.", ACTIONS, tips) == 2
    path, headers, body = fake.requests[0]
    assert path == "/v1/chat/completions"
    assert headers["Authorization"] == "Bearer sk-test-123"
    assert body["model"] == "qwen-test" and body["temperature"] == 0.3
    system, user = body["messages"]
    assert system["role"] == "system" and "numbers" in system["content"]
    assert user["role"] == "user" and "collect the coin" in user["content"] and "A coin glints." in user["content"]
    assert all(f"{i}. {a}" in user["content"] for i, a in enumerate(ACTIONS, 1))
    assert "'take coin' was part of an episode that succeeded" in user["content"]
    assert "'open door' was penalised" in user["content"] and "'look'" not in user["content"].split("Candidate")[0]
    assert (proposer.requests, proposer.failures) == (2, 0)
    proposer.close()


def test_an_echoed_action_text_is_understood_and_no_key_sends_no_authorization(
    llm: tuple[FakeLlm, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, url = llm
    fake.mode = "text"
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("EVOSKILL_LLM__BASE_URL", url)  # configured the way a deployment would
    monkeypatch.setenv("EVOSKILL_LLM__MODEL", "llama")
    proposer = from_settings(Settings())
    assert proposer is not None
    order = ["look", "take coin", "go north"]
    assert proposer.rank("g", "s", order, []).tolist() == [0.0, 1.0, 0.0]
    assert "Authorization" not in fake.requests[0][1] and fake.requests[0][2]["model"] == "llama"
    proposer.close()


@pytest.mark.parametrize("mode", ["500", "sleep", "garbage"])
def test_a_failing_llm_gives_zeros_fast(llm: tuple[FakeLlm, str], mode: str) -> None:
    fake, url = llm
    fake.mode = mode
    proposer = LlmProposer(url, "m", timeout_s=0.3)
    started = time.monotonic()
    bonus = proposer.rank("g", "s", ACTIONS, ["tip"])
    choice = proposer.choose("g", "s", ACTIONS, ["tip"])
    assert time.monotonic() - started < 3.0  # the server would sleep 10 s
    assert bonus.tolist() == [0.0] * len(ACTIONS) and choice is None
    assert len(fake.requests) == 2 and (proposer.requests, proposer.failures) == (2, 2)
    proposer.close()


def test_an_unreachable_llm_gives_zeros() -> None:
    proposer = LlmProposer("http://127.0.0.1:9/v1", "m", timeout_s=1.0)  # port 9 (discard): nothing listens
    assert proposer.rank("g", "s", ["a", "b"], []).tolist() == [0.0, 0.0]
    assert proposer.choose("g", "s", ["a", "b"], []) is None and proposer.failures == 2
    proposer.close()


async def test_the_planner_takes_the_llms_ranking_as_root_priors(llm: tuple[FakeLlm, str], settings: Settings) -> None:
    from evoskill.planner.v1 import planner_pb2, planner_pb2_grpc
    from evoskill.platform.rpc import channel
    from evoskill.platform.service import start_service
    from tests.integration.test_bus import isolated

    fake, url = llm
    fake.prefer = "move"
    settings = isolated(settings).model_copy(update={"llm": LlmSettings(base_url=url, model="tiny")})
    running = [await start_service(name, settings) for name in ("sandbox", "reward", "planner")]
    try:
        request = planner_pb2.PlayEpisodeRequest(
            env_spec="twx:coin", seed=1, fold="test", max_steps=1,
            config=planner_pb2.SearchConfig(num_simulations=4, rollout_depth=2, dirichlet_weight=0.0, seed=1))
        async with channel(settings.endpoint("planner").target) as ch:
            (first,) = [u async for u in planner_pb2_grpc.PlannerServiceStub(ch).PlayEpisode(request, timeout=120)
                        if u.action]
    finally:
        for service in reversed(running):
            await service.stop()
    assert fake.requests and fake.requests[0][2]["model"] == "tiny"
    favourite = max(first.search.root, key=lambda s: s.prior)
    assert "move" in favourite.action and favourite.prior > min(s.prior for s in first.search.root)
