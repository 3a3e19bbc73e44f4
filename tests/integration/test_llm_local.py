"""The LLM path against a real model: SmolLM2-135M-Instruct in llama-cpp-python's server (the llm-local extra,
`make llm-local`), started on a free port. Its answers are a small model's: the tests assert what the path
guarantees whatever it says (a completion counted, only calls that fit the task's tools reach the search,
episodes that finish), not that it plays well. The scripted server (test_planner_llm.py) keeps the error paths.

Out of the default run: `pytest -m llm_local tests/integration/test_llm_local.py` (`make test-llm-local`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from evoskill.core.llm import LlmAnswer, grammar_of
from evoskill.core.reward import Scorer
from evoskill.core.search.model import Path as Path_
from evoskill.core.search.model import SearchModel
from evoskill.core.search_config import SearchConfig
from evoskill.envs.tools.calls import read, tools_in_goal
from evoskill.library.generate import HostSandbox
from evoskill.planner.llm import LlmAdvisor, LlmClient, Usage
from evoskill.planner.search_io import sandbox_simulate
from evoskill.planner.v1 import planner_pb2, planner_pb2_grpc
from evoskill.platform.config import LlmSettings, RewardSettings, Settings
from evoskill.platform.rpc import channel
from evoskill.sandbox.v1 import sandbox_pb2
from evoskill.stack import local_llm
from tests.conftest import _serve, make_settings
from tests.integration.test_planner_llm import rank_prompt
from tests.integration.test_stack import env_of
from tests.integration.tools_fixtures import BOOKSHOP, write_tasks

pytestmark = [pytest.mark.integration, pytest.mark.llm_local,
              pytest.mark.skipif(bool(local_llm.missing()), reason=local_llm.missing() or "installed")]

TIMEOUT_S = 120.0  # one answer on a shared 2-core machine; the tool task's prompt lists every tool's signature


@pytest.fixture(scope="module")
def local_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    logs = tmp_path_factory.mktemp("llm")

    def ready(port: int):  # type: ignore[no-untyped-def]
        return lambda: local_llm.answers(local_llm.base_url("127.0.0.1", port))

    for port in _serve(lambda port: local_llm.server_argv("127.0.0.1", port), ready, "llama-cpp server", logs):
        yield local_llm.base_url("127.0.0.1", port)


def llm_settings(url: str, **overrides: object) -> LlmSettings:
    return LlmSettings(base_url=url, model=local_llm.MODEL_NAME, timeout_s=TIMEOUT_S, **overrides)  # type: ignore[arg-type]


def tool_task(folder: Path) -> str:
    """The example's bookshop (an MCP server over stdio) and a Python function nothing lists a call of."""
    path = write_tasks(folder, {"id": "shop-sum", "goal": "What is 2 + 3? Answer with the number.",
                                "tools": [BOOKSHOP, "pytools:add"], "expected_answer": 5})
    return f"tools:{path}"


def test_a_completion_through_the_planners_client_is_counted(local_url: str) -> None:
    client = LlmClient(llm_settings(local_url))
    usage = Usage()
    try:
        text = client.complete(rank_prompt(), usage)
        assert client.complete(rank_prompt(), usage) == text  # the second from the cache
    finally:
        client.close()
    assert isinstance(text, str) and text.strip(), usage
    assert (usage.requests, usage.cached, usage.failures) == (2, 1, 0)
    assert usage.prompt_tokens > 0 and 0 < usage.completion_tokens <= rank_prompt().max_tokens


def test_only_calls_that_fit_the_tools_schemas_reach_the_search(local_url: str, tmp_path: Path) -> None:
    client = LlmClient(llm_settings(local_url, propose_below=100, max_proposals=3))
    sandbox = HostSandbox()
    session = sandbox.CreateSession(sandbox_pb2.CreateSessionRequest(env_spec=tool_task(tmp_path), seed=0,
                                                                     fold="test"))
    usage = Usage()
    answers: list[LlmAnswer | None] = []
    propose = LlmAdvisor(client).proposer(usage)

    def kept(model: SearchModel, path: Path_) -> LlmAnswer | None:
        answers.append(propose(model, path))
        return answers[-1]

    model = SearchModel(sandbox_simulate(sandbox, session.session_id), Scorer(RewardSettings()), SearchConfig(),
                        propose=kept)
    try:
        model.root()
    finally:
        sandbox.close()
        client.close()
    assert usage.requests == 1 and usage.prompt_tokens > 0, usage  # the model answered
    goal = session.observation.goal
    tools, grammar = tools_in_goal(goal), grammar_of(goal)
    assert {"add", "search_books"} <= set(tools)
    new = answers[0].new if answers[0] is not None else []  # None: it named nothing usable (logged)
    for action in new:
        assert grammar(action) == action  # a call of a listed tool, its arguments typed as the schema says
        read(action, tools)
    assert set(model.proposed.get((), [])) <= set(new)  # the search steps nothing else


def test_a_search_with_the_model_as_rollout_policy_and_leaf_judge(local_url: str) -> None:
    """llm.rollout_steps and llm.value_weight with a real model: whatever it answers, the search finishes with
    one of its candidates, each request is counted, and a rollout's step it chose is one the game lists."""
    client = LlmClient(llm_settings(local_url, rollout_steps=1, value_weight=0.5))
    sandbox = HostSandbox()
    session = sandbox.CreateSession(sandbox_pb2.CreateSessionRequest(env_spec="twx:coin", seed=1, fold="test"))
    usage, advisor = Usage(), LlmAdvisor(client)
    chosen: list[tuple[Path_, int, str | None]] = []
    choose = advisor.rollout_policy(usage)
    assert choose is not None

    def kept(model: SearchModel, path: Path_, k: int) -> str | None:
        chosen.append((path, k, choose(model, path, k)))
        return chosen[-1][2]

    model = SearchModel(sandbox_simulate(sandbox, session.session_id), Scorer(RewardSettings()),
                        SearchConfig(num_simulations=1, value_mix=1.0, rollout_depth=2, dirichlet_weight=0.0),
                        judge=advisor.judge(usage, 1.0), rollout_policy=kept)
    try:
        result = model.run()
    finally:
        sandbox.close()
        client.close()
    assert 0 <= result.action < len(model.actions(()))  # one of its candidates
    asked = [c for c in chosen if c[1] == 0]  # the LLM's steps (one a rollout); the next ones are random
    assert asked and usage.requests >= len(asked) and usage.prompt_tokens > 0, usage
    refused = {action for action, _ in model.rejected}
    for path, _, action in asked:  # None: nothing usable, the rollout went on at random
        assert action is None or (*path, action) in model.nodes or action in refused  # stepped, or refused


@pytest.fixture
def settings(tmp_path: Path, nats_url: str, temporal_address: str, local_url: str) -> Settings:
    """The integration conftest's services on the session's servers, their planner asking the local model."""
    base = make_settings(tmp_path)
    return make_settings(tmp_path, nats=base.nats.model_copy(update={"url": nats_url}),
                         temporal=base.temporal.model_copy(update={"address": temporal_address}),
                         llm=llm_settings(local_url))


@pytest.mark.parametrize("agent", ["llm", "llm+mcts"])
async def test_an_episode_on_a_tool_task_through_the_services(services: Settings, tmp_path: Path,
                                                              agent: str) -> None:
    request = planner_pb2.PlayEpisodeRequest(
        env_spec=tool_task(tmp_path), seed=0, fold="test", max_steps=3,
        config=planner_pb2.SearchConfig(agent=agent, num_simulations=4, seed=0))
    async with channel(services.endpoint("planner").target) as ch:
        updates = [u async for u in planner_pb2_grpc.PlannerServiceStub(ch).PlayEpisode(request, timeout=900)]
    last = updates[-1]
    assert [u for u in updates if u.action], updates  # it played
    assert last.observation.done or len([u for u in updates if u.action]) == 3
    assert last.llm.requests >= 1 and last.llm.prompt_tokens > 0 and last.llm.completion_tokens > 0, last.llm


def cli(env: dict[str, str], *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "evoskill", *args], env={**os.environ, **env},
                          capture_output=True, text=True, timeout=timeout)


def test_llm_local_runs_the_model_in_the_stack_and_eval_llm_uses_it(tmp_path: Path) -> None:
    """`evoskill up` with llm.local: the local server is one more process, its URL printed and given to the
    planner; `eval --llm` with that URL plays on the running stack, another URL is refused, `down` stops it."""
    env = {**env_of(make_settings(tmp_path / "state")), "EVOSKILL_LLM__LOCAL": "true",
           "EVOSKILL_LLM__TIMEOUT_S": str(TIMEOUT_S), "EVOSKILL_TEMPORAL__UI_PORT": "0"}
    up = cli(env, "up", "--detach", "--headless", timeout=300)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        state = json.loads((tmp_path / "state" / "stack.json").read_text())
        (server,) = [c for c in state["components"] if c["kind"] == "llm"]
        assert state["llm"] == {"base_url": server["address"], "model": local_llm.MODEL_NAME}
        assert f"the planner's LLM: {server['address']} (model {local_llm.MODEL_NAME})" in up.stdout
        planner_settings = json.loads((tmp_path / "state" / "settings.json").read_text())
        assert planner_settings["llm"]["base_url"] == server["address"]

        refused = cli(env, "eval", "--env", tool_task(tmp_path), "--agent", "llm", "--llm", "http://127.0.0.1:9/v1")
        assert refused.returncode == 2 and "its planner keeps that" in refused.stderr, refused.stderr

        report = tmp_path / "eval.json"
        played = cli(env, "eval", "--env", tool_task(tmp_path), "--agent", "llm", "--episodes", "1",
                     "--max-steps", "2", "--llm", server["address"], "--json", str(report))
        assert played.returncode == 0, played.stdout + played.stderr
        assert json.loads(report.read_text())["errors"] == 0
    finally:
        down = cli(env, "down", timeout=120)
    assert down.returncode == 0, down.stdout + down.stderr
    assert not (tmp_path / "state" / "stack.json").exists()
    with pytest.raises(ProcessLookupError):
        os.kill(server["pid"], 0)
