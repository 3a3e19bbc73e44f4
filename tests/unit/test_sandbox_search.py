"""SandboxSearch over a real TextWorldExpress game, with the sandbox host and reward core in-process."""

from __future__ import annotations

from typing import Any

import pytest

from evoskill.common.v1.common_pb2 import Observation
from evoskill.core.reward import score_transition
from evoskill.core.search import SearchConfig, search
from evoskill.core.state_text import candidate_text
from evoskill.memory.v1 import memory_pb2
from evoskill.planner.memory_hints import memory_bonus
from evoskill.planner.sandbox_search import SandboxSearch
from evoskill.platform.config import RewardSettings
from evoskill.reward.v1 import reward_pb2
from evoskill.sandbox.host import EnvHost
from evoskill.sandbox.v1 import sandbox_pb2


class HostSandbox:
    """The sandbox service's Simulate without the transport: the same EnvHost the worker runs."""

    def __init__(self, host: EnvHost) -> None:
        self.host, self.calls = host, 0

    def Simulate(self, request: sandbox_pb2.SimulateRequest) -> sandbox_pb2.SimulateReply:
        self.calls += 1
        results, steps = self.host.simulate(list(request.probes), request.gamma)
        return sandbox_pb2.SimulateReply(results=results, env_steps=steps)


class CoreReward:
    def ScoreBatch(self, request: reward_pb2.ScoreBatchRequest) -> reward_pb2.ScoreBatchReply:
        return reward_pb2.ScoreBatchReply(results=[score_transition(t, RewardSettings()) for t in request.transitions])


@pytest.fixture()
def coin() -> Any:
    host, _ = EnvHost.open("twx:coin", 0, "test")
    yield host
    host.close()


def test_actions_that_change_nothing_are_not_candidates(coin: EnvHost) -> None:
    env = SandboxSearch(HostSandbox(coin), CoreReward(), "s")
    root = env.root()
    valid = list(env.nodes[()].observation.valid_actions)
    assert "inventory" in valid and "look around" in valid
    assert "inventory" not in env.actions(()) and "look around" not in env.actions(())
    assert root.num_actions == len(env.actions(())) == len(env.templates(()))
    for action in env.actions(()):  # each candidate leads somewhere else
        assert env.nodes[(action,)].state_key != env.nodes[()].state_key


def test_walking_back_to_a_visited_state_costs_the_revisit_penalty(coin: EnvHost) -> None:
    plain = SandboxSearch(HostSandbox(coin), CoreReward(), "s")
    plain.root()
    shaped = SandboxSearch(HostSandbox(coin), CoreReward(), "s", revisit_penalty=0.5)
    shaped.root()
    # coin seed 0 starts in the kitchen with an open way west; west then east comes back.
    out = shaped.actions(()).index("move west")
    there_plain, there_shaped = plain.step((), out), shaped.step((), out)
    assert there_shaped.reward == there_plain.reward  # a new place: no penalty
    back = shaped.actions(("move west",)).index("move east")
    returned_plain = plain.step(("move west",), back)
    returned_shaped = shaped.step(("move west",), back)
    assert returned_shaped.reward == pytest.approx(returned_plain.reward - 0.5)
    # The same state, reached at another depth, is another node (no cycle in the tree).
    assert returned_shaped.key != (0, shaped.nodes[()].state_key)


def test_theta_reads_which_candidates_lead_back_to_visited_states(coin: EnvHost) -> None:
    env = SandboxSearch(HostSandbox(coin), CoreReward(), "s")
    env.root()
    west = env.actions(()).index("move west")
    env.step((), west)
    texts, templates = env.candidates(("move west",))
    back = env.actions(("move west",)).index("move east")
    assert env.seen(("move west",))[back] and texts[back] == candidate_text("move east", True)
    assert sum(env.seen(("move west",))) == 1  # every other way out of the room is new
    assert templates == env.templates(("move west",))
    # The episode's earlier states count too, and a no-op always leads back (to where it starts).
    there = env.nodes[("move west",)].state_key
    remembered = SandboxSearch(HostSandbox(coin), CoreReward(), "s", visited=frozenset({there}))
    remembered.root()
    assert remembered.seen(())[remembered.actions(()).index("move west")]
    assert remembered.seen((), ["inventory"]) == [True]


def test_new_nodes_of_one_round_share_one_simulate_call(coin: EnvHost) -> None:
    sandbox = HostSandbox(coin)
    env = SandboxSearch(sandbox, CoreReward(), "s", rollout_depth=0)
    env.root()
    before = sandbox.calls
    transitions = env.step_batch([((), i) for i in range(len(env.actions(())))])
    assert sandbox.calls == before + 1  # the grandchildren of all new nodes in one call
    assert all(t.num_actions == len(env.actions(t.state)) for t in transitions if not t.done)


def test_search_wins_a_coin_game() -> None:
    """Seed 0: the coin is five rooms and a door away."""
    host, obs = EnvHost.open("twx:coin", 0, "test")
    visited: set[str] = set()
    try:
        for index in range(30):
            env = SandboxSearch(HostSandbox(host), CoreReward(), "s", revisit_penalty=0.5,
                                visited=frozenset(visited), seed=index)
            root = env.root()
            visited.add(env.nodes[()].state_key)
            result = search(root, env.step, SearchConfig(num_simulations=32, seed=index), env.evaluate,
                            step_batch=env.step_batch)
            obs = host.step(env.actions(())[result.action]).after
            if obs.done:
                break
        assert obs.won
    finally:
        host.close()


def test_retrieved_memories_tilt_the_root_priors(coin: EnvHost) -> None:
    env = SandboxSearch(HostSandbox(coin), CoreReward(), "s", rollout_depth=0)
    env.root()
    assert env.evaluate([()]).logits is None  # uniform without θ or memories
    good = memory_pb2.ScoredExperience(experience=memory_pb2.Experience(action="move west", success=True),
                                       similarity=0.9)
    env.root_bonus = memory_bonus(env.actions(()), env.templates(()), [good], weight=2.0)
    (logits,) = env.evaluate([()]).logits or []
    assert env.actions(())[int(logits.argmax())] == "move west"


def test_a_document_read_inside_search_becomes_the_notes_below_it() -> None:
    env = SandboxSearch(None, None, "s", notes="the episode's recipe")
    for path, text in {("read note",): "Directions: dice the carrot.", ("read note", "take carrot"): "Taken.",
                       ("take carrot",): "Taken."}.items():
        env.nodes[path] = sandbox_pb2.ProbeResult(observation=Observation(text=text))
    assert env.notes_at(()) == env.notes_at(("take carrot",)) == "the episode's recipe"
    assert env.notes_at(("read note", "take carrot")) == "Directions: dice the carrot."


def test_reading_a_document_is_a_candidate_until_its_text_is_in_the_notes() -> None:
    """Reading changes the notes, not the room: θ alone could never read the recipe if it were a no-op."""
    host, _ = EnvHost.open("twx:cookingworld?numLocations=1,numIngredients=2,numDistractorItems=3,includeDoors=0", 0,
                           "train")
    try:
        host.step("take cookbook")  # seed 0 starts with the cookbook on the counter
        env = SandboxSearch(HostSandbox(host), CoreReward(), "s")
        env.root()
        read = env.actions(()).index("read cookbook")
        assert not env.seen(())[read] and "look around" not in env.actions(())
        assert env.step((), read).reward > -1.0  # a real step, not a dead end
        recipe = env.nodes[("read cookbook",)].observation.text
        assert "Directions" in recipe and env.notes_at(("read cookbook",)) == recipe.strip()
        again = SandboxSearch(HostSandbox(host), CoreReward(), "s", notes=recipe.strip())
        again.root()
        assert "read cookbook" not in again.actions(())
    finally:
        host.close()
