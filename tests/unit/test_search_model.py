"""The search's environment model over a real TextWorldExpress game, with the sandbox host in-process
(its `simulate` is what the sandbox's Simulate answers) and the reward scored in-process."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from evoskill.common.v1.common_pb2 import Action, Observation, Transition
from evoskill.core.episode_record import record_step
from evoskill.core.learn import episode_examples
from evoskill.core.llm import llm_prior
from evoskill.core.reward import Scorer
from evoskill.core.search import SearchConfig, search
from evoskill.core.search.advice import llm_priors, memories, theta
from evoskill.core.search.model import ROLLOUT_SEED_STRIDE, SearchModel
from evoskill.core.state_text import candidate_text
from evoskill.events.v1.events_pb2 import EpisodeCompleted
from evoskill.memory.v1 import memory_pb2
from evoskill.planner.search_io import search_target
from evoskill.platform.config import RewardSettings, Settings
from evoskill.reward.service import RewardServicer
from evoskill.sandbox.host import EnvHost
from evoskill.sandbox.v1 import sandbox_pb2

SCORE = Scorer(RewardSettings())


class CountingHost:
    """`EnvHost.simulate`, counting the calls (one call = one Simulate RPC in the planner)."""

    def __init__(self, host: EnvHost) -> None:
        self.host, self.calls = host, 0

    def __call__(self, probes: list[sandbox_pb2.Probe], gamma: float) -> tuple[list[sandbox_pb2.ProbeResult], int]:
        self.calls += 1
        return self.host.simulate(probes, gamma)


def model(host: EnvHost, **config: Any) -> SearchModel:
    visited = config.pop("visited", frozenset())
    return SearchModel(host.simulate, SCORE, SearchConfig(**{"revisit_penalty": 0.0, **config}), visited)


def test_actions_that_change_nothing_are_not_candidates(coin: EnvHost) -> None:
    env = model(coin)
    root = env.root()
    valid = list(env.nodes[()].observation.valid_actions)
    assert "inventory" in valid and "look around" in valid
    assert "inventory" not in env.actions(()) and "look around" not in env.actions(())
    assert root.num_actions == len(env.actions(())) == len(env.templates(()))
    for action in env.actions(()):  # each candidate leads somewhere else
        assert env.nodes[(action,)].state_key != env.nodes[()].state_key


def test_the_roots_children_are_stepped_however_many_and_deeper_nodes_within_the_cap(coin: EnvHost) -> None:
    n = len(coin.simulate([sandbox_pb2.Probe()], 0.97)[0][0].observation.valid_actions)
    env = model(coin, prefetch_children=1)  # fewer than any node's actions
    env.root()
    assert "inventory" not in env.actions(()) and all((a,) in env.nodes for a in env.actions(()))
    assert len(env.actions(())) < n
    first = env.actions(())[0]
    env.step((), 0)
    assert "inventory" in env.actions((first,))  # a deeper node over the cap: nothing stepped, nothing dropped
    off = model(coin, prefetch_children=0)  # 0: no children stepped anywhere, the root's neither
    off.root()
    assert len(off.actions(())) == n and len(off.nodes) == 1


def test_walking_back_to_a_visited_state_costs_the_revisit_penalty(coin: EnvHost) -> None:
    plain = model(coin)
    plain.root()
    shaped = model(coin, revisit_penalty=0.5)
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
    env = model(coin)
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
    remembered = model(coin, visited=frozenset({there}))
    remembered.root()
    assert remembered.seen(())[remembered.actions(()).index("move west")]
    assert remembered.seen((), ["inventory"]) == [True]


def test_new_nodes_of_one_round_share_one_simulate_call(coin: EnvHost) -> None:
    sandbox = CountingHost(coin)
    env = SearchModel(sandbox, SCORE, SearchConfig(rollout_depth=0))
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
            env = SearchModel(host.simulate, SCORE, SearchConfig(num_simulations=32, batch_size=1, seed=index),
                              frozenset(visited))
            root = env.root()
            visited.add(env.nodes[()].state_key)
            result = search(root, env.step, env.config, env.evaluate, step_batch=env.step_batch)
            obs = host.step(env.actions(())[result.action]).after
            if obs.done:
                break
        assert obs.won
    finally:
        host.close()


def test_retrieved_memories_tilt_the_root_priors(coin: EnvHost) -> None:
    env = model(coin, rollout_depth=0)
    env.root()
    assert env.evaluate([()]).logits is None  # uniform without θ or memories
    good = memory_pb2.ScoredExperience(experience=memory_pb2.Experience(action="move west", success=True),
                                       similarity=0.9)
    env.advice.append(memories([good], weight=2.0))
    (logits,) = env.evaluate([()]).logits or []
    assert env.actions(())[int(logits.argmax())] == "move west"


def test_a_document_read_inside_search_becomes_the_notes_below_it() -> None:
    env = SearchModel(None, SCORE, notes="the episode's recipe")  # type: ignore[arg-type]
    for path, text in {("read note",): "Directions: dice the carrot.", ("read note", "take carrot"): "Taken.",
                       ("take carrot",): "Taken."}.items():
        env.nodes[path] = sandbox_pb2.ProbeResult(observation=Observation(text=text))
    assert env.notes_at(()) == env.notes_at(("take carrot",)) == "the episode's recipe"
    assert env.notes_at(("read note", "take carrot")) == "Directions: dice the carrot."


def test_search_scores_its_steps_as_the_reward_service_does(coin: EnvHost) -> None:
    """In-process rewards inside search, the same numbers as the reward service's for the same transitions."""
    settings = Settings()
    service = RewardServicer(settings)
    env = SearchModel(coin.simulate, Scorer.for_settings(settings), SearchConfig(rollout_depth=0, seed=2))
    env.run()
    assert len(env.rewards) > 1  # the edges search took, and only those, were scored
    assert len(env.rewards) < len(env.nodes) - 1
    for path, reward in env.rewards.items():
        assert reward == service.score(env.nodes[path].transition).total
    imagined = env.reward(("move west",))
    assert service.score(coin.step("move west")).total == imagined  # the real step, as search imagined it


def test_advice_composes_theta_memories_and_the_llms_prior(coin: EnvHost) -> None:
    read: list[Any] = []

    def policy(inputs: Any) -> tuple[list[np.ndarray], np.ndarray]:
        read.extend(inputs)
        return [np.arange(len(i[2]), dtype=np.float32) for i in inputs], np.full(len(inputs), 0.5)

    good = memory_pb2.ScoredExperience(experience=memory_pb2.Experience(action="move west", success=True),
                                       similarity=0.9)
    sandbox = CountingHost(coin)
    env = SearchModel(sandbox, SCORE, SearchConfig(value_mix=0.0))
    env.root()
    child = (env.actions(())[0],)
    env.step((), 0)
    env.ranked[()] = [env.actions(())[-1]]  # what the LLM would have named at the root
    env.advice += [theta(policy), memories([good], weight=2.0), llm_priors("product", 1.0)]
    calls = sandbox.calls
    out = env.evaluate([(), child])
    assert sandbox.calls == calls  # no rollouts at value_mix 0
    env.config = env.config.model_copy(update={"value_mix": 1.0})
    advised = env.advise([(), child])  # what θ alone acts on: the advice, never a rollout
    assert sandbox.calls == calls and advised.values.tolist() == [0.5, 0.5]
    assert out.logits is not None
    n, west = len(env.actions(())), env.actions(()).index("move west")
    expected = np.arange(n, dtype=np.float64)
    expected[west] += 2.0 * 0.9
    expected += np.log(llm_prior([n - 1], n))
    np.testing.assert_allclose(out.logits[0], expected, rtol=1e-6)
    np.testing.assert_allclose(out.logits[1], np.arange(len(env.actions(child))))  # the LLM named nothing there
    assert out.values.tolist() == [0.5, 0.5]
    assert read[0][2] == env.candidates(())[0] and read[1][3] == env.templates(child)


def test_leaf_values_mix_theta_with_the_rollout(coin: EnvHost) -> None:
    def policy(inputs: Any) -> tuple[list[np.ndarray], np.ndarray]:
        return [np.zeros(len(i[2])) for i in inputs], np.full(len(inputs), 2.0)

    env = model(coin, value_mix=0.25, rollout_depth=12, seed=7)
    env.advice.append(theta(policy))
    env.root()
    (value,) = env.evaluate([()]).values
    (probe,), _ = coin.simulate([sandbox_pb2.Probe(rollout_depth=12, rollout_seed=7 * ROLLOUT_SEED_STRIDE + 1)], 0.97)
    assert probe.rollout_steps > 0
    rollout = SCORE.rollout(probe.rollout_return - probe.rollout_outcome, probe.rollout_outcome,
                            probe.rollout_final_score)  # in the reward service's units, as θ's value is
    assert value == pytest.approx(0.75 * 2.0 + 0.25 * rollout)
    assert model(coin, value_mix=1.0, rollout_depth=0).evaluate([()]).values.tolist() == [0.0]


def test_a_guided_rollout_takes_the_policys_steps_then_plays_on_at_random(coin: EnvHost) -> None:
    """A rollout policy (the LLM's, llm.rollout_steps) chooses the first steps of a leaf's rollout among the
    actions that may change the world; the sandbox's random rollout plays the rest of rollout_depth, and the
    return is discounted from the leaf and valued as a random one is."""
    asked: list[tuple[tuple[str, ...], int]] = []

    def first_step(env: SearchModel, path: tuple[str, ...], k: int) -> str | None:
        asked.append((path, k))
        return env.actions(())[-1] if k < 1 else None  # a candidate that changes something

    env = model(coin, value_mix=1.0, rollout_depth=5, seed=3)
    env.rollout_policy = first_step
    env.root()
    (value,) = env.evaluate([()]).values
    guided = (env.actions(())[-1],)
    assert asked == [((), 0), (guided, 1)]
    candidates = env.rollout_candidates(())[0]  # never an action that only reads where another may change the world
    assert guided[0] in candidates and not {"look around", "inventory"} & set(candidates)
    gamma = env.config.gamma
    (rest,), _ = coin.simulate([sandbox_pb2.Probe(actions=guided, rollout_depth=4,
                                                  rollout_seed=3 * ROLLOUT_SEED_STRIDE + 1)], gamma)
    assert rest.rollout_steps > 0  # the random part: the rest of the depth, from where the policy stopped
    gain = env.nodes[guided].transition.env_reward + gamma * (rest.rollout_return - rest.rollout_outcome)
    expected = SCORE.rollout(gain, gamma * rest.rollout_outcome, rest.rollout_final_score)
    assert value == pytest.approx(expected)


def test_a_rollout_policy_that_knows_the_way_values_the_leaf_as_a_win() -> None:
    children = {"burn it": (True, False, 0.0), "eat meal": (True, True, 1.0)}
    values = {}
    for choice in children:
        env = SearchModel(scripted(children), SCORE, SearchConfig(value_mix=1.0, rollout_depth=4))
        env.rollout_policy = lambda env, path, k, choice=choice: choice
        env.root()
        values[choice] = env.evaluate([()]).values[0]
    assert values["eat meal"] == pytest.approx(SCORE.rollout(0.8, 1.0, 1.0))  # its score gain and the won ending
    assert values["burn it"] == pytest.approx(SCORE.rollout(-0.2, -1.0, 0.0))
    assert values["burn it"] < 0 < values["eat meal"]


def test_gumbel_target_covers_every_valid_action_and_reaches_the_learner(coin: EnvHost) -> None:
    env = SearchModel(coin.simulate, SCORE, SearchConfig(algorithm="gumbel", num_simulations=8, rollout_depth=4))
    target = search_target(env.run(), env)
    valid = list(env.nodes[()].observation.valid_actions)
    assert list(target.actions) == valid and len(target.policy_probs) == len(valid)
    assert sum(target.policy_probs) == pytest.approx(1.0, abs=1e-6)
    probs = dict(zip(target.actions, target.policy_probs, strict=True))
    assert probs["inventory"] == 0.0  # a no-op: search never considered it
    assert all(probs[a] > 0 for a in env.actions(()))  # every candidate, visited or not
    assert sum(v > 0 for v in target.visit_probs) <= 8

    episode = EpisodeCompleted(episode_id="e")
    record_step(episode, Transition(before=env.nodes[()].observation, action=Action(text=valid[0])), target, 0.0)
    (example,) = episode_examples(episode)
    np.testing.assert_allclose(example.visit_probs, target.policy_probs, rtol=1e-6)  # distilled: the improved policy
    assert example.q_mask.tolist() == [v > 0 for v in target.visit_probs]  # Q targets: visited actions only


def test_puct_target_leaves_the_improved_policy_empty(coin: EnvHost) -> None:
    env = SearchModel(coin.simulate, SCORE, SearchConfig(num_simulations=8, rollout_depth=0))
    result = env.run()
    assert result.policy_target is None and not search_target(result, env).policy_probs


def test_reading_a_document_is_a_candidate_until_its_text_is_in_the_notes() -> None:
    """Reading changes the notes, not the room: θ alone could never read the recipe if it were a no-op."""
    host, _ = EnvHost.open("twx:cookingworld?numLocations=1,numIngredients=2,numDistractorItems=3,includeDoors=0", 0,
                           "train")
    try:
        host.step("take cookbook")  # seed 0 starts with the cookbook on the counter
        env = model(host)
        env.root()
        read = env.actions(()).index("read cookbook")
        assert not env.seen(())[read] and "look around" not in env.actions(())
        assert not env.step((), read).done  # a real step, not a dead end
        recipe = env.nodes[("read cookbook",)].observation.text
        assert "Directions" in recipe and env.notes_at(("read cookbook",)) == recipe.strip()
        again = SearchModel(host.simulate, SCORE, SearchConfig(), frozenset(), recipe.strip())
        again.root()
        assert "read cookbook" not in again.actions(())
    finally:
        host.close()


def scripted(children: dict[str, tuple[bool, bool, float]]):  # type: ignore[no-untyped-def]
    """A root whose children are (done, won, score) as given: a deterministic world seen through `simulate`."""

    def simulate(probes: list[sandbox_pb2.Probe], gamma: float) -> tuple[list[sandbox_pb2.ProbeResult], int]:
        out = []
        for probe in probes:
            if not probe.actions:
                obs = Observation(text="a kitchen", valid_actions=list(children), score=0.2)
                out.append(sandbox_pb2.ProbeResult(observation=obs, state_key="root",
                                                   templates=list(children)))
                continue
            done, won, score = children[probe.actions[0]]  # and "wait" after it changes nothing
            obs = Observation(text=probe.actions[0], done=done, won=won, lost=done and not won, score=score,
                              valid_actions=[] if done else ["wait"])
            before = Observation(text="a kitchen", score=0.2)
            transition = Transition(action=Action(text=probe.actions[-1]), before=before, after=obs,
                                    env_reward=score - before.score)
            out.append(sandbox_pb2.ProbeResult(observation=obs, state_key=probe.actions[0],
                                               templates=[] if done else ["wait"], transition=transition))
        return out, len(probes)

    return simulate


@pytest.mark.parametrize("prune", [True, False])
def test_a_child_that_loses_at_once_is_not_a_candidate_where_another_remains(prune: bool) -> None:
    children = {"cook in barbeque": (True, False, 0.2), "fry": (False, False, 0.4), "eat meal": (True, True, 1.0),
                "burn it": (True, False, 0.0)}
    env = SearchModel(scripted(children), SCORE, SearchConfig(prune_losses=prune))
    env.root()
    expected = ["fry", "eat meal"] if prune else list(children)
    assert list(env.actions(())) == expected  # a win is kept; losing gains nothing, so it goes
    only_losses = SearchModel(scripted({"burn it": (True, False, 0.0)}), SCORE, SearchConfig())
    only_losses.root()
    assert list(only_losses.actions(())) == ["burn it"]  # nothing else to do: it stays


def test_the_real_step_takes_the_first_preferred_action_not_seen_to_lose() -> None:
    children = {"focus on egg": (True, False, 0.0), "burn it": (True, False, 0.2), "open jar": (False, False, 0.2),
                "eat meal": (True, True, 1.0)}
    calls: list[int] = []
    simulate = scripted(children)

    def counting(probes: list[sandbox_pb2.Probe], gamma: float) -> tuple[Any, int]:
        calls.append(len(probes))
        return simulate(probes, gamma)

    env = SearchModel(counting, SCORE, SearchConfig(prefetch_children=0))  # a large root: nothing prefetched
    env.root()
    assert list(env.actions(())) == list(children) and len(env.nodes) == 1
    assert env.safe_choice([0, 1, 2, 3], tries=4) == 2  # the two losses stepped and passed over, then "open jar"
    assert calls[1:] == [1, 1, 1] and env.losing().tolist() == [True, True, False, False]
    assert env.safe_choice([3, 0], tries=4) == 3  # a win is not a loss
    fresh = SearchModel(scripted(children), SCORE, SearchConfig(prefetch_children=0))
    fresh.root()
    assert fresh.safe_choice([0, 1, 2], tries=1) == 1  # out of tries: the next one is not known to lose
    assert fresh.safe_choice([1, 0], tries=4) == 1 and fresh.losing()[:2].tolist() == [True, True]  # each loses
