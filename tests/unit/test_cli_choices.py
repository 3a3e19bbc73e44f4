"""The CLI's declared choices and ranges: each enum mirrors what its consumer checks, and a value outside is one
line from the console entry point (`evoskill.cli:main`), exit 2, before any work."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from evoskill import cli_choices
from evoskill.cli import main
from evoskill.core.agent import AgentKind
from evoskill.core.errors import InvalidInput


def test_each_choice_mirrors_what_its_consumer_accepts() -> None:
    from evoskill.envs.spec import FOLDS
    from evoskill.library.finetune import FORMATS
    from evoskill.orchestrator.training.logic import EVAL_AGENTS, SEARCH_ALGORITHMS, TUNE_MODES
    from evoskill.platform.config import SERVICES

    assert tuple(cli_choices.Fold) == FOLDS and set(cli_choices.HeldOutFold) < set(FOLDS)
    assert tuple(cli_choices.ExportFold) == (*FOLDS, "any")
    assert tuple(cli_choices.ExportFormat) == FORMATS and tuple(cli_choices.Service) == SERVICES
    assert ("", *cli_choices.SearchAlgorithm) == SEARCH_ALGORITHMS and ("", *cli_choices.TuneMode) == TUNE_MODES
    assert ("", *cli_choices.EvalAgent) == EVAL_AGENTS


def test_the_exploration_switches_set_only_what_is_given() -> None:
    on, off = cli_choices.MemorySwitch.ON, cli_choices.MemorySwitch.OFF
    assert cli_choices.exploration_config(None, None, None, 0.0) == {}  # the planner's settings
    assert cli_choices.exploration_config(0.1, 0.5, on, 0.0) == {"explore_epsilon": 0.1, "novelty_weight": 0.5,
                                                                 "memory_weight": 1.0}
    assert cli_choices.exploration_config(None, None, None, 0.0, 0.2) == {"curiosity_weight": 0.2}
    assert cli_choices.exploration_config(None, None, on, 0.3) == {"memory_weight": 0.3}  # the setting's own weight
    assert cli_choices.exploration_config(0.0, None, off, 0.3) == {"explore_epsilon": 0.0, "memory_weight": 0.0}
    assert cli_choices.exploration_config(None, None, None, 0.0, None, 0.3) == {"entropy_trigger": 0.3}


def test_comma_separated_options_parse_to_their_items_in_order_without_repeats() -> None:
    assert cli_choices.numbers(least=0)(" 2, 0,1 ") == [2, 0, 1]
    assert cli_choices.agents("policy,random,policy") == [AgentKind.POLICY, AgentKind.RANDOM]
    assert cli_choices.engines("edge,local") == [cli_choices.Engine.EDGE, cli_choices.Engine.LOCAL]
    parsed = cli_choices.numbers()("4")
    assert cli_choices.numbers()(parsed) is parsed  # typer passes defaults through the parser again


def test_agent_kind_parses_the_wire_names_and_says_what_it_accepts() -> None:
    assert AgentKind.parse("") is AgentKind.MCTS and AgentKind.parse("policy+mcts") is AgentKind.POLICY_MCTS
    assert [k for k in AgentKind if k.searches] == [AgentKind.MCTS, AgentKind.POLICY_MCTS, AgentKind.LLM_MCTS]
    assert [k for k in AgentKind if k.uses_llm] == [AgentKind.LLM, AgentKind.LLM_MCTS]
    assert [k for k in AgentKind if k.uses_policy] == [AgentKind.POLICY, AgentKind.POLICY_MCTS]
    with pytest.raises(InvalidInput, match="agent 'randum' is not one of random, mcts, policy, policy\\+mcts, demo"):
        AgentKind.parse("randum")


@pytest.mark.parametrize(("args", "named"), [
    (["solve", "--env", "twx:coin", "--simulations", "0"],
     "'--simulations': Input should be greater than or equal to 1"),
    (["eval", "--env", "twx:coin", "--fold", "validation"], "'--fold'"),
    (["train", "--env", "twx:coin", "--search-algorithm", "alphazero"], "'--search-algorithm'"),
    (["train", "--env", "twx:coin", "--online-fraction", "1.5"], "'--online-fraction'"),
    (["train", "--env", "twx:coin", "--eval-fold", "train"], "'--eval-fold'"),
    (["explore", "--candidate", "v1", "--env", "twx:coin", "--canary-episodes", "1"], "'--canary-episodes'"),
    (["export", "--format", "dpo"], "'--format'"),
    (["demos", "--env", "twx:coin", "--episodes", "0", "--to-learner"], "'--episodes'"),
    (["library", "train", "--steps", "0"], "'--steps'"),
    (["bench", "quality", "--suite", "coin", "--seeds", "0"], "'--seeds'"),
    (["bench", "pipeline", "--load", "--agent", "randum"],
     "'--agent': 'randum' is not one of 'random', 'mcts', 'policy', 'policy+mcts', 'demo'"),
    (["health", "foo"], "'foo' is not one of 'sandbox'"),
    (["solve", "--env", "twx:coin", "--llm", "ftp://127.0.0.1/v1"], "'--llm': 'ftp://127.0.0.1/v1' is not an http(s)"),
    (["eval", "--env", "twx:coin", "--llm", "127.0.0.1:8000"], "'--llm'"),
    (["train", "--env", "twx:coin", "--llm", "http://"], "'--llm'"),
    # Comma-separated lists: each item checked as declared (cli_choices.numbers, agents, engines).
    (["bench", "outer-loop", "--seeds", "0,x"], "'--seeds': 'x' is not an integer"),
    (["bench", "quality", "--suite", "coin", "--agents", "random,randum"],
     "'--agents': 'randum' is not one of random, mcts, policy"),
    (["bench", "memory", "--sizes", "1000,-5"], "'--sizes': -5 is below 1"),
    (["bench", "memory", "--engines", "local,disk"], "'--engines': 'disk' is not one of local, edge"),
    (["bench", "targets", "--budgets", ","], "'--budgets': expected one or more comma-separated integers"),
])
def test_a_value_outside_a_declared_choice_or_range_is_one_line_and_exit_2(
        args: list[str], named: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("EVOSKILL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(sys, "argv", ["evoskill", *args])
    with pytest.raises(SystemExit) as exited:
        main()
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert exited.value.code == 2, captured.err
    assert len(lines) == 1 and lines[0].startswith("error: ") and named in lines[0], captured.err
    assert "--help`" in lines[0] and "Traceback" not in captured.err + captured.out
    assert not (tmp_path / "state").exists()  # nothing was started
