"""Agents behind one interface (core/agent.py, planner/agents.py) and the one factory that builds them; the
episode runner with a shadow agent over a real CoinCollector game, the sandbox host in-process."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence

import numpy as np
import pytest

from evoskill.common.v1 import common_pb2
from evoskill.core.agent import Decision, EpisodeMemory, RandomAgent, Step
from evoskill.core.errors import FailedPrecondition, InvalidInput
from evoskill.core.reward import Scorer
from evoskill.core.search.advice import PolicyFn
from evoskill.core.search_config import SearchConfig
from evoskill.library.generate import HostSandbox, LocalReward
from evoskill.planner.agents import AgentTools, DemoAgent, PolicyAgent, SearchAgent, build_agent
from evoskill.planner.episode import EpisodePlayer, episode_memory, validate
from evoskill.planner.v1 import planner_pb2
from evoskill.platform.config import RewardSettings, Settings
from evoskill.sandbox.v1 import sandbox_pb2
from tests.unit.test_search_model import scripted

Batch = Sequence[tuple[str, str, Sequence[str], Sequence[str]]]


def east_and_west(batch: Batch) -> tuple[list[np.ndarray], np.ndarray]:
    """A θ that loves walking east and west, whatever it reads."""
    prefer = {"move west": 2.0, "move east": 1.5}
    return [np.array([prefer.get(a.split(" (")[0], 0.0) for a in actions]) for _, _, actions, _ in batch], \
        np.full(len(batch), 0.25)


def request(agent: str, max_steps: int = 0, shadow_policy_version: str = "") -> planner_pb2.PlayEpisodeRequest:
    return planner_pb2.PlayEpisodeRequest(env_spec="twx:coin", seed=0, fold="test", max_steps=max_steps,
                                          config=planner_pb2.SearchConfig(agent=agent, num_simulations=4),
                                          shadow_policy_version=shadow_policy_version)


def tools() -> AgentTools:
    return AgentTools(HostSandbox(), SearchConfig(), Scorer(RewardSettings()))


def test_the_memory_records_each_real_step_once() -> None:
    memory = EpisodeMemory(seed=7)
    memory.record("kitchen", "read cookbook", "  Recipe: slice the carrot. ")
    memory.record("", "look", "You are in the kitchen.")  # an agent that never looked the state up
    assert memory.visited == {"kitchen": 1} and memory.taken == ["read cookbook", "look"]
    assert memory.notes == "Recipe: slice the carrot."  # the document read, not the last feedback
    assert [memory.step_seed(i) for i in (0, 1)] == [7000, 7001]


def test_each_step_seed_follows_the_search_seed_else_the_episodes() -> None:
    assert episode_memory(planner_pb2.PlayEpisodeRequest(seed=3)).step_seed(2) == 3002
    with_search_seed = planner_pb2.PlayEpisodeRequest(seed=3, config=planner_pb2.SearchConfig(seed=5))
    assert episode_memory(with_search_seed).step_seed(2) == 5002


def test_the_random_agent_draws_from_its_seed_among_the_valid_actions() -> None:
    obs = common_pb2.Observation(valid_actions=["north", "south", "take coin"])
    step = Step("s", obs, 0, 0, EpisodeMemory())
    picks = [RandomAgent(random.Random(1)).act(step).action for _ in range(2)]
    assert picks[0] == picks[1] and picks[0] in obs.valid_actions
    decision = RandomAgent(random.Random(1)).act(step)
    assert list(decision.target.actions) == list(obs.valid_actions) and decision.search is None


@pytest.mark.parametrize(("agent", "kind", "advised"), [
    ("", SearchAgent, False), ("mcts", SearchAgent, False), ("policy+mcts", SearchAgent, True),
    ("policy", PolicyAgent, True), ("random", RandomAgent, False), ("demo", DemoAgent, False)])
def test_the_factory_builds_the_agent_the_request_names(agent: str, kind: type, advised: bool) -> None:
    built = build_agent(tools(), request(agent), east_and_west, gold_path=["take coin"])
    assert isinstance(built, kind)
    if isinstance(built, SearchAgent | PolicyAgent):
        assert (built.policy is east_and_west) == advised  # plain mcts searches on uniform priors


def test_the_factory_refuses_what_cannot_play() -> None:
    with pytest.raises(InvalidInput,
                       match="'greedy' is not one of random, mcts, policy, policy\\+mcts, demo, llm, llm\\+mcts"):
        build_agent(tools(), request("greedy"), None)
    with pytest.raises(FailedPrecondition, match="'policy\\+mcts' needs a published policy"):
        build_agent(tools(), request("policy+mcts"), None)
    with pytest.raises(InvalidInput, match="no gold path to demonstrate"):
        build_agent(tools(), request("demo"), None, gold_path=[])


def test_a_shadow_needs_an_agent_that_plays_with_a_policy() -> None:
    with pytest.raises(InvalidInput, match="shadow_policy_version needs an agent that plays with a policy"):
        validate(request("mcts", shadow_policy_version="v000002"), SearchConfig())
    validate(request("policy+mcts", shadow_policy_version="v000002"), SearchConfig())


def play(agent: str, shadow: PolicyFn | None = None) -> tuple[EpisodePlayer, list[planner_pb2.EpisodeUpdate]]:
    settings = Settings()
    player = EpisodePlayer(HostSandbox(), LocalReward(settings), SearchConfig(), Scorer(RewardSettings()),
                           east_and_west, shadow_policy=shadow)
    played = request(agent, max_steps=5, shadow_policy_version="v000002" if shadow else "")
    return player, list(player.play(played))


@pytest.mark.parametrize("agent", ["policy+mcts", "policy"])
def test_the_shadow_decides_on_the_acting_agents_state_and_memory(agent: str) -> None:
    """The shadow with the acting agent's own θ decides as it does at every step (the same state, memory and
    seed), and acts on nothing: the episode counts each real state once."""
    player, updates = play(agent, shadow=east_and_west)
    steps = [u for u in updates if u.action]
    assert len(steps) >= 2
    for update in steps:
        assert (update.shadow.action, update.shadow.valid) == (update.action, True)
        expected = update.search.root_value if agent == "policy+mcts" else 0.25  # θ's own value without search
        assert update.shadow.value == pytest.approx(expected)
    assert sum(player.episode.visited.values()) == len(steps) and player.episode.taken == [u.action for u in steps]
    alone, _ = play(agent)
    assert [s.action.text for s in alone.completed.steps] == player.episode.taken  # the shadow changed no choice


def test_an_agent_reads_the_memory_and_leaves_it_alone() -> None:
    agents = tools()
    session = agents.sandbox.CreateSession(sandbox_pb2.CreateSessionRequest(env_spec="twx:coin", seed=0, fold="test",
                                                                            episode_id="e"))

    def remembered() -> EpisodeMemory:
        return EpisodeMemory(seed=1, visited=Counter({"somewhere": 2}), notes="a note", taken=["look"])

    memory = remembered()
    step = Step(session.session_id, session.observation, 1, memory.step_seed(1), memory)
    for agent in (PolicyAgent(agents, east_and_west, "twx:coin", SearchConfig()),
                  SearchAgent(agents, planner_pb2.SearchConfig(agent="policy+mcts", num_simulations=4), "twx:coin",
                              east_and_west)):
        decision = agent.act(step)
        assert isinstance(decision, Decision) and decision.action in session.observation.valid_actions
        assert decision.state_key and memory == remembered()  # the runner records the step, once


class OutOfTime(HostSandbox):
    """A sandbox whose search time is up but for the `answered` Simulate calls (1: the first)."""

    def __init__(self, answered: int) -> None:
        super().__init__()
        self.answered, self.calls = answered, 0

    def Simulate(self, request: sandbox_pb2.SimulateRequest, timeout: float | None = None) -> sandbox_pb2.SimulateReply:
        self.calls += 1
        answer = self.calls == self.answered
        return super().Simulate(request, timeout) if answer else sandbox_pb2.SimulateReply(partial=True)


@pytest.mark.parametrize(("agent", "answered"), [("policy+mcts", 1), ("mcts", 1), ("policy+mcts", 2)])
def test_a_search_out_of_time_acts_on_the_prior_and_the_episode_goes_on(agent: str, answered: int) -> None:
    """Time for the root only (1), or for nothing (2: the root is read again without a deadline)."""
    agents = AgentTools(OutOfTime(answered), SearchConfig(), Scorer(RewardSettings()))
    session = agents.sandbox.CreateSession(sandbox_pb2.CreateSessionRequest(env_spec="twx:coin", seed=0, fold="test",
                                                                            episode_id="e"))
    memory = EpisodeMemory(seed=1)
    policy = east_and_west if agent == "policy+mcts" else None
    config = planner_pb2.SearchConfig(agent=agent, num_simulations=8)
    decision = SearchAgent(agents, config, "twx:coin", policy).act(Step(session.session_id, session.observation, 0,
                                                                        1, memory))
    valid = list(session.observation.valid_actions)
    logits = east_and_west([("", "", valid, [])])[0][0] if policy else np.zeros(len(valid))
    assert decision.action == valid[int(np.argmax(logits))]  # θ's favourite; the first candidate where none advises
    assert decision.search is not None and decision.search.stats.timed_out
    assert decision.search.stats.simulations == 0 and not any(s.visits for s in decision.search.root)


def test_the_episode_remembers_an_action_that_left_its_state_as_it_was() -> None:
    from evoskill.core.agent import EpisodeMemory

    memory = EpisodeMemory()
    memory.record("hall", "look around", "the hall")
    memory.record("hall", "go to kitchen", "the kitchen")  # the same key after "look around": a no-op there
    memory.record("kitchen", "look around", "the kitchen")
    assert memory.no_ops == {("hall", "look around")}
    assert memory.tried["hall", "look around"] == 1


def test_an_action_repeated_without_progress_is_charged_even_where_no_state_repeats() -> None:
    """A heating stove changes the room every step: no two keys match, yet "look around" fifty times is a loop."""
    from evoskill.core.agent import EpisodeMemory

    memory = EpisodeMemory()
    for i in range(3):
        memory.record(f"room-{i}", "look around", "a stove, hotter", score=0.1)
    assert memory.times_taken("room-9", "look around") == 3 and memory.times_taken("room-9", "wait") == 0
    memory.record("room-3", "look around", "a stove", score=0.2)  # the score rose: the streak starts again
    assert memory.times_taken("room-9", "look around") == 0
    memory.record("room-4", "wait", "you wait", score=0.2)
    memory.record("room-5", "look around", "a stove", score=0.2)
    assert memory.times_taken("room-9", "look around") == 1  # in a row only: another action came between
    memory.record("room-5", "look around", "a stove", score=0.2)
    assert memory.times_taken("room-5", "look around") == 2  # here the tried count says the same


def test_the_memory_keeps_the_actions_that_raised_the_score_from_the_first_step_on() -> None:
    memory = EpisodeMemory()
    start = common_pb2.Observation(text="outside", score=0.1)
    focused = common_pb2.Observation(text="You focus on the frog.", score=0.6)
    memory.record("outside", "focus on frog", focused.text, focused.score, moved=(start, focused))
    memory.record("outside", "look around", "outside", 0.6, moved=(focused, focused))
    memory.record("outside", "pick up frog", "You pick up the frog.", 0.7)
    assert memory.scored == ["focus on frog", "pick up frog"]


def test_walking_back_into_a_room_with_nothing_gained_is_charged_though_the_room_changed() -> None:
    """Plants grow and water evaporates in ScienceWorld's greenhouse: its state key differs at every visit, yet
    walking outside and back with the same inventory and score is a loop; carrying something new is not."""
    from evoskill.common.v1.common_pb2 import Observation
    from evoskill.core.agent import EpisodeMemory

    def room(name: str, inventory: str = "nothing", extra: str = "") -> Observation:
        return Observation(look=f"This room is called the {name}. {extra}", inventory=inventory, score=0.1)

    memory = EpisodeMemory()
    memory.record("g0", "go to outside", "", 0.1, moved=(room("greenhouse", extra="a seed"), room("outside")))
    assert memory.times_taken("o0", "go to greenhouse") == 1  # never walked this way, but named like the way out
    memory.record("o0", "go to greenhouse", "", 0.1, moved=(room("outside"), room("greenhouse", extra="a sprout")))
    assert memory.times_taken("g1", "go to outside") == 1  # entered once with nothing new since
    assert memory.times_taken("g1", "go to hallway") == 0  # a move the map does not know
    assert memory.walks_back == 1  # back in the greenhouse it began in
    memory.record("g1", "go to outside", "", 0.1, moved=(room("greenhouse", extra="a sprout"), room("outside")))
    assert memory.times_taken("o1", "go to greenhouse") == 2  # the episode began there: entered twice
    assert memory.walks_back == 2
    memory.record("o1", "pick up shovel", "", 0.1, moved=(room("outside"), room("outside", "a shovel")))
    assert memory.times_taken("o2", "go to greenhouse") == 0  # carrying a shovel: a place not entered yet


class ScriptedSandbox:
    """A root whose children are (done, won, score) as given, answered as the sandbox's Simulate answers."""

    def __init__(self, children: dict[str, tuple[bool, bool, float]]) -> None:
        self.simulate, self.probed = scripted(children), []

    def Simulate(self, request: sandbox_pb2.SimulateRequest, timeout: float | None = None) -> sandbox_pb2.SimulateReply:
        self.probed += [tuple(p.actions) for p in request.probes]
        results, steps = self.simulate(list(request.probes), request.gamma)
        return sandbox_pb2.SimulateReply(results=results, env_steps=steps)


def loves(action: str) -> PolicyFn:
    """A sure θ: `action` by far, whatever it reads."""
    return lambda batch: ([np.array([9.0 if a == action else 0.0 for a in actions]) for _, _, actions, _ in batch],
                          np.zeros(len(batch)))


@pytest.mark.parametrize("trigger", [0.0, 0.99])  # search decides / θ is sure enough to act unsearched
@pytest.mark.parametrize("prune", [True, False])
def test_search_never_takes_a_step_it_saw_lose_while_another_remains(trigger: float, prune: bool) -> None:
    """A large root (children not prefetched, as on ScienceWorld) and a θ sure of an action that ends the game."""
    children = {"focus on egg turtle": (True, False, 0.0), "look around": (False, False, 0.2),
                "focus on egg parrot": (False, False, 0.5)}
    sandbox = ScriptedSandbox(children)
    settings = SearchConfig(prefetch_children=0, prune_losses=prune, entropy_trigger=trigger, dirichlet_weight=0.0)
    agents = AgentTools(sandbox, settings, Scorer(RewardSettings()))
    observation = common_pb2.Observation(text="outside", valid_actions=list(children), score=0.2)
    config = planner_pb2.SearchConfig(agent="policy+mcts", num_simulations=4)
    decision = SearchAgent(agents, config, "sciworld:identify-life-stages-1", loves("focus on egg turtle")).act(
        Step("s", observation, 0, 1, EpisodeMemory(seed=1)))
    assert decision is not None
    if not prune:
        assert decision.action == "focus on egg turtle"  # θ's choice, taken all the same
        return
    assert ("focus on egg turtle",) in sandbox.probed  # stepped, by the search or before the real step
    assert decision.action == "look around"  # the next by search's visits, or by θ (a tie: the listed order) ...
    target = {a: p for a, p in zip(decision.target.actions, decision.target.visit_probs, strict=False)}
    assert target.get("focus on egg turtle", 0.0) == 0.0  # ... and the learner is not taught the loss
