"""Search results as TRL chat JSONL (library/finetune.py, `evoskill export`): the prompt is what θ reads, SFT rows
come from won episodes' steps, preference pairs from the search's visits and Q by the documented margin, tool
tasks carry their schemas; the rows have TRL's columns (and load with `datasets` where it is installed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from evoskill.cli import app
from evoskill.core.learn.data import episode_examples
from evoskill.core.state_text import SEEN_MARK
from evoskill.envs.tools.calls import ToolInfo
from evoskill.events.v1 import events_pb2
from evoskill.library.finetune import (
    PREFERENCE,
    SFT,
    SYSTEM_PROMPT,
    ExportOptions,
    ExportTally,
    assistant,
    export_rows,
    preference_pairs,
    tool_schemas,
)
from evoskill.library.generate import generate
from evoskill.library.jsonl import parse_line, write_jsonl

ROLES = {"system", "user", "assistant"}
COIN = "twx:coin"


def episode(won: bool = True, fold: str = "train", search: dict[str, Any] | None = None,
            episode_id: str = "e1") -> events_pb2.EpisodeCompleted:
    """Two steps: a searched one (unless `search` is None) and a demonstration."""
    first: dict[str, Any] = {"observation": "You are in the kitchen.", "valid_actions": ["move east", "look around",
                             "take coin", "move west"], "seen": [False, True, False, False], "action": "move east",
                             "reward": 0.0, "score": 0.0, "done": False}
    if search is not None:
        first["search"] = search
    second = {"observation": "You are in the pantry. There is a coin here.", "valid_actions": ["take coin",
              "move west"], "action": "take coin", "reward": 1.0, "score": 1.0, "done": True}
    line = json.dumps({"episode_id": episode_id, "env": COIN, "seed": 3, "fold": fold, "goal": "Find the coin.",
                       "won": won, "score": 1.0 if won else 0.0, "steps": [first, second]})
    return parse_line(line, "test")


SEARCH = {"visit_probs": [0.5, 0.3, 0.2, 0.0], "q_values": [0.9, 0.85, 0.4, 0.0], "root_value": 0.8}


def trl_type(row: dict[str, Any]) -> str:
    """The dataset type TRL's docs (dataset_formats.md) give a row's columns, checking the conversational form:
    each column a list of {"role", "content"} messages, roles system/user/assistant."""
    for column in ("messages", "prompt", "chosen", "rejected"):
        if column in row:
            messages = row[column]
            assert isinstance(messages, list) and messages, column
            assert all(set(m) - {"tool_calls"} == {"role", "content"} and m["role"] in ROLES
                       and isinstance(m["content"], str) for m in messages), messages
            for message in messages:  # a tool call in the documented form
                for call in message.get("tool_calls", ()):
                    assert message["role"] == "assistant" and call["type"] == "function"
                    assert set(call["function"]) == {"name", "arguments"}
                    assert isinstance(call["function"]["arguments"], dict)
    if "messages" in row:
        assert row["messages"][-1]["role"] == "assistant" and "prompt" not in row
        return "language modeling"
    assert {"prompt", "chosen", "rejected"} <= set(row)
    assert [m["role"] for m in row["chosen"]] == [m["role"] for m in row["rejected"]] == ["assistant"]
    assert row["prompt"][-1]["role"] == "user"
    return "preference"


def test_the_prompt_is_what_theta_reads_and_sft_answers_with_the_action_taken() -> None:
    ep = episode(search=SEARCH)
    rows = list(export_rows([ep], ExportOptions(format=SFT)))
    assert [trl_type(r) for r in rows] == ["language modeling"] * 2
    system, user, answer = rows[0]["messages"]
    assert system == {"role": "system", "content": SYSTEM_PROMPT}
    example = episode_examples(ep)[0]
    assert user["content"] == (f"Goal: {example.goal}\n\nObservation:\n{example.observation}\n\nCandidate actions:\n"
                               f"- move east\n- look around{SEEN_MARK}\n- take coin\n- move west")
    assert answer == {"role": "assistant", "content": "move east"}
    assert rows[1]["messages"][-1]["content"] == "take coin"
    assert {k: rows[1][k] for k in ("episode_id", "step_index", "env")} == {"episode_id": "e1", "step_index": 1,
                                                                              "env": COIN}
    assert "tools" not in rows[0]


def test_filters_sft_keeps_won_train_games_by_default_and_stops_at_the_limit() -> None:
    games = [episode(episode_id="won"), episode(won=False, episode_id="lost"), episode(fold="dev", episode_id="dev")]
    tally = ExportTally()
    rows = list(export_rows(games, ExportOptions(format=SFT), tally=tally))
    assert {r["episode_id"] for r in rows} == {"won"}
    assert tally.by_reason == {"lost": 1, "not the train fold": 1} and tally.rows == 2 and tally.kept == 1
    rows = list(export_rows(games, ExportOptions(format=SFT, won_only=False, fold=None)))
    assert [r["episode_id"] for r in rows] == ["won", "won", "lost", "lost", "dev", "dev"]
    assert len(list(export_rows(games, ExportOptions(format=SFT, fold=None, limit=3)))) == 3
    assert not list(export_rows(games, ExportOptions(format=SFT, env="twx:cookingworld")))


def test_a_preference_pair_is_the_most_visited_action_against_a_visited_one_clearly_lower_in_q() -> None:
    example = episode_examples(episode(search=SEARCH))[0]
    # move east (most visited, Q .9) vs take coin (Q .4); look around is within the margin, move west unvisited.
    assert preference_pairs(example) == [(0, 2)]
    assert preference_pairs(example, per_state=3) == [(0, 2)]
    assert preference_pairs(example, q_margin=0.01, per_state=3) == [(0, 1), (0, 2)]  # the more visited first
    assert preference_pairs(example, q_margin=0.6) == []
    tied = episode_examples(episode(search={"visit_probs": [0.4, 0.4, 0.2, 0.0], "q_values": [0.2, 0.7, 0.1, 0.0]}))
    assert preference_pairs(tied[0]) == [(1, 0)]  # equal visits: the higher Q is chosen
    demo = episode_examples(episode())[0]
    assert preference_pairs(demo) == []  # no search, no comparison


def test_preference_rows_come_from_searched_steps_of_lost_games_too() -> None:
    rows = list(export_rows([episode(won=False, search=SEARCH)], ExportOptions(format=PREFERENCE)))
    (row,) = rows
    assert trl_type(row) == "preference"
    assert row["chosen"] == [{"role": "assistant", "content": "move east"}]
    assert row["rejected"] == [{"role": "assistant", "content": "take coin"}]
    assert row["prompt"] == next(export_rows([episode(search=SEARCH)], ExportOptions(format=SFT)))["messages"][:2]
    assert (row["chosen_q"], row["rejected_q"]) == pytest.approx((0.9, 0.4))
    assert (row["chosen_visit_share"], row["rejected_visit_share"]) == pytest.approx((0.5, 0.2))
    assert not list(export_rows([episode(won=False, search=SEARCH)], ExportOptions(format=PREFERENCE,
                                                                                   won_only=True)))


def test_bad_options_are_named() -> None:
    with pytest.raises(ValueError, match="format 'dpo' is not one of sft, preference"):
        ExportOptions(format="dpo")
    with pytest.raises(ValueError, match="q_margin must be a finite number >= 0"):
        ExportOptions(format=PREFERENCE, q_margin=-1)


def test_tool_schemas_are_functions_with_the_meta_actions_after_them() -> None:
    add = ToolInfo("add", "Adds two integers.", {"type": "object", "properties": {"a": {"type": "integer"},
                   "b": {"type": "integer"}}, "required": ["a", "b"]}, source="python:pytools")
    schemas = tool_schemas([add])
    assert schemas[0] == {"type": "function", "function": {"name": "add", "description": "Adds two integers.",
                                                           "parameters": dict(add.schema)}}
    assert [s["function"]["name"] for s in schemas] == ["add", "final_answer", "combine_results", "ask_clarification"]
    assert all(s["type"] == "function" and s["function"]["parameters"]["type"] == "object" for s in schemas)
    rows = list(export_rows([episode()], ExportOptions(format=SFT), tools_of=lambda _: schemas))
    assert all(r["tools"] == schemas for r in rows)


def test_tool_calls_answer_with_the_call_bound_to_the_schema() -> None:
    schemas = tool_schemas([ToolInfo("add", "Adds.", {"type": "object", "properties": {"a": {"type": "integer"},
                                     "b": {"type": "integer"}}}, source="python:t")])

    def called(action: str) -> Any:
        (message,) = assistant(action, schemas)
        return message.get("tool_calls", message["content"])
    add = [{"type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 3}}}]
    assert called("add(a=2, b=3)") == called("add(2, b=3)") == add  # positional values take the schema's order
    assert called("final_answer(answer=[5, 'x'])")[0]["function"] == {"name": "final_answer",
                                                                      "arguments": {"answer": [5, "x"]}}
    assert called("combine_results()")[0]["function"]["arguments"] == {}
    assert called("move east") == "move east" and called("subtract(a=1)") == "subtract(a=1)"  # no call of a tool
    assert assistant("add(a=2, b=3)") == [{"role": "assistant", "content": "add(a=2, b=3)"}]  # the default
    rows = list(export_rows([episode()], ExportOptions(format=SFT, tool_calls=True), tools_of=lambda _: schemas))
    assert [trl_type(r) for r in rows] == ["language modeling"] * 2  # coin's actions are no calls: text stays


def test_export_from_a_library_file_of_gold_paths(tmp_path: Path) -> None:
    library, out = tmp_path / "coin.jsonl", tmp_path / "sft.jsonl"
    games = list(generate(COIN, "train", range(0, 2), workers=1, seen=False))
    with library.open("w") as sink:
        write_jsonl(games, sink)
    runner = CliRunner()
    result = runner.invoke(app, ["export", "--format", "sft", "--from", str(library), "--json", str(out)])
    assert result.exit_code == 0, result.output
    steps = sum(len(g.steps) for g in games)
    assert f"{steps} sft rows from 2 of 2 episodes ({steps} steps, 0 searched)" in " ".join(result.output.split())
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["messages"][-1]["content"] for r in rows] == [s.action.text for g in games for s in g.steps]
    assert all(trl_type(r) == "language modeling" for r in rows)
    result = runner.invoke(app, ["export", "--format", "preference", "--from", str(library), "--json", str(out)])
    assert result.exit_code == 0 and out.read_text() == ""  # gold paths are not searched: nothing to compare
    result = runner.invoke(app, ["export", "--format", "dpo", "--from", str(library)])
    assert result.exit_code == 2 and "'--format'" in result.output and "'dpo' is not one of" in result.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"env": "twx:coin"}\n')
    result = runner.invoke(app, ["export", "--format", "sft", "--from", str(bad), "--json", str(out)])
    assert result.exit_code == 2 and "line 1: seed: Field required" in " ".join(result.output.split())
    assert out.read_text() == ""  # the earlier file is left as it was: nothing half-written replaced it


def test_the_jsonl_loads_with_datasets_with_trl_columns(tmp_path: Path) -> None:
    import datasets  # the dev extra's: how TRL's SFT and DPO trainers read a JSONL file
    sft, pref = tmp_path / "sft.jsonl", tmp_path / "pref.jsonl"
    schemas = tool_schemas([ToolInfo("add", "Adds.", {"type": "object", "properties": {"a": {"type": "integer"}}},
                                     source="python:t")])
    for path, options in ((sft, ExportOptions(format=SFT)), (pref, ExportOptions(format=PREFERENCE))):
        rows = list(export_rows([episode(search=SEARCH), episode(search=SEARCH, episode_id="e2")], options,
                                tools_of=lambda e: schemas if e.episode_id == "e2" else None))
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    loaded = datasets.load_dataset("json", data_files=str(sft), split="train")
    assert {"messages", "tools"} <= set(loaded.column_names) and loaded.num_rows == 4
    assert loaded[0]["messages"][-1] == {"role": "assistant", "content": "move east"}
    assert loaded[0]["tools"] is None and loaded[2]["tools"] == schemas
    loaded = datasets.load_dataset("json", data_files=str(pref), split="train")
    assert {"prompt", "chosen", "rejected"} <= set(loaded.column_names) and loaded.num_rows == 2
