"""The bfcl: scheme on the real bfcl-eval package: its API simulations run the calls, its multi-turn checker scores
the episode (gold paths of train entries accepted in every category, wrong ones not), wrong calls are observations,
snapshots restore the API objects, test entries show no answer."""

from __future__ import annotations

import copy
import importlib.util

import pytest

from evoskill.envs import InvalidActionError, make_env, parse_spec
from evoskill.envs.bfcl import data
from evoskill.envs.bfcl.env import END_TURN, BfclEnv
from evoskill.envs.registry import scheme_registry

pytestmark = pytest.mark.skipif(importlib.util.find_spec("bfcl_eval") is None,
                                reason="bfcl-eval is not installed (make install installs it: --no-deps)")


def _objects(env: BfclEnv) -> dict[str, dict[str, object]]:
    state = copy.deepcopy(env._current_state())  # the values as they are now
    return {name: {k: v for k, v in vars(o).items() if not k.startswith("_")} for name, o in state.objects.items()}


def _play(env: BfclEnv, actions: list[str]) -> None:
    for action in actions:
        env.step(action)


def test_the_spec_names_a_category_and_an_entry() -> None:
    assert parse_spec("bfcl:base").canonical() == "bfcl:multi_turn_base"
    spec = parse_spec("bfcl:multi_turn_miss_func?entry=7")
    assert spec.canonical() == "bfcl:multi_turn_miss_func?entry=multi_turn_miss_func_7"
    with pytest.raises(ValueError, match="accepted: multi_turn_base"):
        parse_spec("bfcl:live_simple")
    with pytest.raises(ValueError, match="no entry"):
        parse_spec("bfcl:base?entry=999")
    assert "bfcl" in scheme_registry().names()


def test_folds_split_the_entries_and_only_train_entries_give_their_answer() -> None:
    ids = {f: {e.id for e in data.pool("multi_turn_base", f)} for f in ("train", "dev", "test")}
    assert [len(ids[f]) for f in ("train", "dev", "test")] == [120, 40, 40]
    assert not ids["train"] & ids["test"] and not ids["dev"] & ids["test"]
    with make_env("bfcl:multi_turn_base") as env:
        env.reset(0, "test")
        assert env.gold_path() is None and "multi_turn_base_0" in env.goal
        env.reset(0, "train")
        assert env.gold_path() and "multi_turn_base_2" in env.goal


@pytest.mark.parametrize("category", data.CATEGORIES)
def test_gold_paths_of_train_entries_are_accepted_by_bfcls_checker(category: str) -> None:
    with make_env(f"bfcl:{category}") as env:
        for seed in range(3):
            env.reset(seed, "train")
            gold = env.gold_path()
            assert gold and gold.count(END_TURN) == len(env._current_entry().turns)
            _play(env, gold)
            assert env.done and env.won and env.score == 1.0, env.observation().text
            assert "accepts every turn" in env.observation().text


def test_the_first_turn_offers_the_gold_call_and_the_turn_ends() -> None:
    with make_env("bfcl:multi_turn_base?entry=1") as env:  # "list all the visible and hidden contents"
        env.reset()
        assert "ls(a=True)" in env.valid_actions() and END_TURN in env.valid_actions()
        assert "ask_clarification()" in env.valid_actions()
        assert env.template("ls(a=True)") == "ls(a)" and env.template(END_TURN) == "final_answer(answer)"
        obs, _ = env.step("ls(a=True)")
        assert '"current_directory_content"' in obs.text and "workspace" in obs.text
        assert "cd(folder='workspace')" in env.valid_actions()  # a value the result gave
        obs, _ = env.step(END_TURN)
        assert obs.text.startswith("User: Go to workspace directory") and "2. Go to workspace" in obs.goal


def test_a_wrong_call_is_an_observation_and_a_wrong_path_is_not_accepted() -> None:
    with make_env("bfcl:multi_turn_base?entry=1") as env:
        env.reset()
        obs, _ = env.step("cd(folder='nowhere')")  # BFCL's file system answers with an error
        assert "failed" in obs.text and "No such file or directory" in obs.text and not obs.done
        assert env.last_failure() is not None
        obs, _ = env.step("teleport(to='mars')")  # no such function: BFCL's executor's answer
        assert "name 'teleport' is not defined" in obs.text
        obs, _ = env.step("cd('workspace', 'extra')")  # Python's error for the method, as BFCL's executor gives it
        assert "Error during execution" in obs.text
        with pytest.raises(InvalidActionError, match="not a call"):
            env.step("list the files")
        turns = len(env._current_entry().turns)
        _play(env, [END_TURN] * turns)
        assert env.done and not env.won and env.score == 0.0
        assert "does not accept turn 1" in env.observation().text


def test_a_result_too_long_to_write_is_an_error_answer() -> None:
    with make_env("bfcl:multi_turn_base?entry=15") as env:  # MathAPI: 10**5000 has more digits than str() writes
        env.reset()
        obs, _ = env.step("power(base=10, exponent=5000)")
        assert "Error during execution: Exceeds the limit" in obs.text and not obs.done
        assert env.valid_actions()


def test_the_score_is_the_share_of_turns_accepted_from_the_first() -> None:
    with make_env("bfcl:multi_turn_base?entry=2") as env:  # entry 2 is train
        env.reset()
        gold = env.gold_path()
        assert gold is not None
        first_turn = gold[: gold.index(END_TURN) + 1]
        _play(env, first_turn)
        _play(env, [END_TURN] * (gold.count(END_TURN) - 1))
        assert not env.won and env.score == pytest.approx(1 / gold.count(END_TURN))


def test_a_snapshot_restores_the_api_objects_without_replay() -> None:
    with make_env("bfcl:multi_turn_base?entry=2") as env:
        env.reset()
        gold = env.gold_path()
        assert gold is not None
        env.step(gold[0])
        snap = env.snapshot()
        before, valid = _objects(env), env.valid_actions()
        _play(env, gold[1:4])
        assert _objects(env) != before
        env.restore(snap)
        assert _objects(env) == before and env.valid_actions() == valid and env.actions == gold[:1]
        _play(env, gold[1:])
        assert env.won


def test_a_held_out_function_is_listed_from_its_turn_on() -> None:
    held = next(e for e in data.pool("multi_turn_miss_func", "train") if e.held_out)
    turn, names = next(iter(held.held_out.items()))
    with make_env(f"bfcl:multi_turn_miss_func?entry={held.id}") as env:
        env.reset()
        assert not set(names) & {t.name for t in env.tools()}
        for _ in range(turn):
            obs, _ = env.step(END_TURN)
        assert set(names) <= {t.name for t in env.tools()}
        assert "new functions" in obs.text and "I have updated some more functions" in obs.text
