"""Candidates beyond the environment's list: the learner keeps the demonstrated actions no list named, θ's file
carries them, and the search model proposes each where the state names its objects, the environment judging."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from evoskill.common.v1.common_pb2 import Action, Observation, Transition
from evoskill.core.errors import InvalidInput
from evoskill.core.learn import HashingFeaturizer, Learner, OnnxPolicy
from evoskill.core.learn.export import DEMONSTRATED_KEY, unfit
from evoskill.core.learn.replay import MixedReplay
from evoskill.core.llm.prompt import LlmAnswer
from evoskill.core.reward import Scorer
from evoskill.core.search import SearchConfig
from evoskill.core.search.demonstrated import demonstrations, named, plausible, together
from evoskill.core.search.model import SearchModel
from evoskill.platform.config import LearnerSettings, RewardSettings
from evoskill.sandbox.v1 import sandbox_pb2
from tests.unit.test_learn_data import make_episode, make_step
from tests.unit.test_learn_train import FAST, SMALL

LISTED = ["focus on seed jar", "look around"]
ROOM = "This room is called the kitchen. In it, you see: a seed jar, a counter"


def test_an_action_is_plausible_where_the_state_names_its_objects() -> None:
    assert named(["pick up seed jar", "read recipe in inventory"]) == [
        ("pick up seed jar", {"seed", "jar"}), ("read recipe in inventory", {"recipe", "inventory"})]
    demonstrated = named(["pick up seed jar", "pick up metal pot", "focus on seed jar", "look around"])
    assert plausible(demonstrated, LISTED, ROOM) == ["pick up seed jar"]  # listed ones are the list's
    assert plausible(demonstrated, LISTED, "") == ["pick up seed jar"]  # the list names the jar too
    assert plausible(named(["pick up metal pot"]), LISTED, ROOM + ", a metal pot") == ["pick up metal pot"]


def world(refused: set[str]):  # type: ignore[no-untyped-def]
    """A kitchen whose list names the seed jar but not picking it up: the environment takes what it takes."""

    def simulate(probes: list[sandbox_pb2.Probe], gamma: float) -> tuple[list[sandbox_pb2.ProbeResult], int]:
        out = []
        for probe in probes:
            action = probe.actions[-1] if probe.actions else ""
            if action in refused:
                raise InvalidInput(f"No known action matches {action!r}")
            changed = action in ("pick up seed jar", "focus on seed jar")
            obs = Observation(text=action or ROOM, valid_actions=LISTED)
            out.append(sandbox_pb2.ProbeResult(
                observation=obs, state_key=action if changed else "kitchen", templates=["focus on X", "look around"],
                transition=Transition(action=Action(text=action, template="pick up X"), after=obs)))
        return out, len(probes)

    return simulate


def test_the_search_model_offers_a_demonstrated_action_the_environment_takes() -> None:
    demonstrated = ["pick up seed jar", "open seed jar", "move seed jar to counter", "pick up metal pot"]
    env = SearchModel(world({"open seed jar"}), Scorer(RewardSettings()), SearchConfig(prune_losses=False),
                      propose=demonstrations(demonstrated))
    env.root()
    # taken: picking the jar up; refused: opening it; changes nothing: moving it; not named here: the pot
    assert list(env.actions(())) == ["focus on seed jar", "pick up seed jar"]
    assert env.listed(()) == [*LISTED, "pick up seed jar"] and env.templates(())[-1] == "pick up X"
    assert [a for a, _ in env.rejected] == ["open seed jar"]
    assert not env.ranked.get(())  # no ranking of its own: θ and the search judge


def test_an_llms_proposals_and_the_demonstrated_ones_go_together() -> None:
    def llm(model: SearchModel, path: tuple[str, ...]) -> LlmAnswer:
        return LlmAnswer(ranked=["focus on seed jar"], new=["pick up seed jar", "eat seed jar"])

    both = together(llm, demonstrations(["pick up seed jar", "move seed jar to counter"]))
    assert both is not None and together(None, llm) is llm and together(None, None) is None
    env = SearchModel(world(set()), Scorer(RewardSettings()), SearchConfig(prune_losses=False), propose=both)
    env.root()
    answer = both(env, ())
    assert answer is not None and answer.ranked == ["focus on seed jar"]
    assert answer.new == ["pick up seed jar", "eat seed jar", "move seed jar to counter"]


def test_theta_learns_and_its_file_names_the_demonstrated_actions_no_list_named(tmp_path: Path) -> None:
    step = make_step("Grow a plant.", ROOM, ["pick up seed jar", *LISTED], 0, template="pick up X")
    step.transition.before.ClearField("valid_actions")
    step.transition.before.valid_actions.extend(LISTED)
    step.target.actions.extend(LISTED)
    step.transition.before.look, step.transition.after.look = ROOM, ROOM.replace("a seed jar, ", "")
    replay = MixedReplay(seed=0)
    replay.add(make_episode("demo", [step], won=True), offline=True)
    learner = Learner(HashingFeaturizer(32), FAST, SMALL, replay)
    assert learner.train(20)["steps"] == 20
    policy = OnnxPolicy(learner.export(tmp_path))
    assert policy.demonstrated == ("pick up seed jar",) and unfit(policy) is None
    priors, _ = policy.score([("Grow a plant.", ROOM)], [[("focus on seed jar", "focus on X"),
                                                          ("pick up seed jar", "pick up X")]])
    assert int(np.argmax(priors[0])) == 1  # it chooses the jar when offered
    off = Learner(HashingFeaturizer(32), LearnerSettings(**{**FAST.model_dump(), "demonstrated_actions": 0}), SMALL,
                  replay)
    off.train(2)
    assert OnnxPolicy(off.export(tmp_path / "off")).demonstrated == ()


@pytest.mark.parametrize("metadata", ['{"a": 1}', "[1, 2]", "not json", '["' + "x" * 2000 + '"]'])
def test_a_file_whose_demonstrated_actions_are_malformed_is_unfit(tmp_path: Path, metadata: str) -> None:
    replay = MixedReplay(seed=0)
    replay.add(make_episode("e", [make_step("g", "o", ["a", "b"], 0)]), offline=True)
    learner = Learner(HashingFeaturizer(32), FAST, SMALL, replay)
    learner.train(1)
    path = learner.export(tmp_path)
    model = onnx.load(str(path))
    model.metadata_props.add(key=DEMONSTRATED_KEY, value=metadata)
    onnx.save(model, str(path))
    policy = OnnxPolicy(path)
    assert policy.demonstrated == () and DEMONSTRATED_KEY in (unfit(policy) or "")
