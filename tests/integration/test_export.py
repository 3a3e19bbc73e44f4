"""`evoskill export` on real episodes: a real search's targets give preference pairs by the Q margin, and a tool
task's gold path gives SFT rows carrying the schemas its Python tool host lists."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from evoskill.cli import app
from evoskill.core.learn.data import episode_examples
from evoskill.library.finetune import PREFERENCE, ExportOptions, export_rows
from evoskill.library.generate import HostSandbox, LocalReward, generate
from evoskill.library.jsonl import write_jsonl
from evoskill.planner.episode import EpisodePlayer
from evoskill.planner.v1 import planner_pb2
from evoskill.platform.config import Settings
from evoskill.sandbox.service import textworld_cache_dir
from tests.integration.tools_fixtures import write_tasks
from tests.unit.test_finetune_export import trl_type

pytestmark = pytest.mark.integration


def test_a_real_search_gives_pairs_of_its_most_visited_action_against_clearly_worse_ones() -> None:
    settings = Settings()
    sandbox, reward = HostSandbox(textworld_cache_dir(settings)), LocalReward(settings)
    search = settings.search.model_copy(update={"prefetch_children": 0})  # no children stepped: a faster game
    player = EpisodePlayer(sandbox, reward, search, reward.scorer)
    request = planner_pb2.PlayEpisodeRequest(env_spec="twx:coin", seed=0, fold="train", max_steps=4,
                                             episode_id="export-mcts",
                                             config=planner_pb2.SearchConfig(agent="mcts", num_simulations=16, seed=1))
    try:
        for _ in player.play(request):
            pass
    finally:
        sandbox.close()
    episode = player.completed
    examples = {e.step_index: e for e in episode_examples(episode)}
    rows = list(export_rows([episode], ExportOptions(format=PREFERENCE, pairs_per_state=8)))
    assert rows, "no searched step had a visited action 0.1 below the most visited one"
    for row in rows:
        assert trl_type(row) == "preference"
        example = examples[row["step_index"]]
        actions = list(example.actions)
        chosen, rejected = actions.index(row["chosen"][0]["content"]), actions.index(row["rejected"][0]["content"])
        assert example.q_mask[chosen] and example.q_mask[rejected]
        assert example.visit_probs[chosen] == example.visit_probs[example.q_mask].max()
        assert row["chosen_q"] - row["rejected_q"] >= 0.1 - 1e-6
        assert np.isclose(row["rejected_q"], example.q_values[rejected])


def test_a_tool_tasks_rows_carry_its_tools_schemas(tmp_path: Path) -> None:
    path = write_tasks(tmp_path, {"id": "sum", "goal": "What is 2 + 3?", "tools": ["pytools:add"],
                                  "arguments": {"a": [2], "b": [3]}, "expected_answer": 5,
                                  "gold": ["add(a=2, b=3)", "final_answer(answer=5)"]})
    (game,) = generate(f"tools:{path}", "train", range(0, 1), seen=False)
    assert game.won
    library, out = tmp_path / "library.jsonl", tmp_path / "sft.jsonl"
    with library.open("w") as sink:
        write_jsonl([game], sink)
    result = CliRunner().invoke(app, ["export", "--format", "sft", "--from", str(library), "--json", str(out)])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["messages"][-1]["content"] for r in rows] == ["add(a=2, b=3)", "final_answer(answer=5)"]
    tools = rows[0]["tools"]
    assert tools[0] == {"type": "function", "function": {  # the host's schema (pydantic's, from the signature)
        "name": "add", "description": "Adds two integers.",
        "parameters": {"type": "object", "required": ["a", "b"],
                       "properties": {"a": {"title": "A", "type": "integer"}, "b": {"title": "B", "type": "integer"}}}}}
    assert [t["function"]["name"] for t in tools] == ["add", "final_answer", "combine_results", "ask_clarification"]
    assert "- add(a: integer, b: integer)" in rows[0]["messages"][1]["content"]  # the goal lists them too
    assert all(r["tools"] == tools for r in rows)
    result = CliRunner().invoke(app, ["export", "--format", "sft", "--from", str(library), "--json", str(out),
                                      "--tool-calls"])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [trl_type(r) for r in rows] == ["language modeling"] * 2
    assert [r["messages"][-1]["tool_calls"][0]["function"] for r in rows] == [
        {"name": "add", "arguments": {"a": 2, "b": 3}}, {"name": "final_answer", "arguments": {"answer": 5}}]
