"""Quality benchmark: the issue's table for one suite, as one command.

    evoskill bench quality --suite cooking-easy --json quality-cooking-easy.json [--quick] [--seeds 3]

1. The offline library: the suite's train-fold gold paths (`evoskill demos`, worker processes), once.
2. Per training seed, a fresh embedded stack (the outer-loop benchmark's): `evoskill library import` the
   library, `evoskill library train` θ on it for the suite's gradient steps (behaviour cloning), then, where
   the suite has them, TrainingWorkflow epochs of online search starting from that θ (`evoskill train
   --policy`); θ is evaluated on the test fold with search (policy+mcts) and alone (policy, greedy).
3. Random and uniform-prior MCTS at the same simulations on the same test games, once (they do not depend
   on θ), on the first seed's stack.

`--choose group.name=V1,V2` picks a setting of θ's without the test fold: per seed, θ is trained once per
value (a stack each), each θ alone plays the suite's dev-fold games, and the one with the best dev mean score
(the first listed on a tie) plays the test games, on its own stack started again; the summary records every
value's dev figures and the choice.

Every figure is a subprocess of the public CLI, as in the outer-loop benchmark; their logs and JSON reports
stay under `--work-dir`. `--set group.name=value` (e.g. `learner.encoder=reader`) reaches every process
of every stack as EVOSKILL_GROUP__NAME, as do EVOSKILL_* variables already set.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from pydantic import BaseModel, ValidationError
from rich.console import Console
from rich.table import Table

from evoskill.bench.outer_loop import AgentRow, EvalArgs, _cli, evaluate, play_baseline_rows, stack
from evoskill.bench.suites import AGENTS, Budget, Suite
from evoskill.core.agent import AgentKind
from evoskill.platform.config import Settings
from evoskill.platform.provenance import git_revision, write_report

GAME_CACHE_VAR = "EVOSKILL_ENVS__CACHE_DIR"
# The test games are played without ε-greedy, as the TrainingWorkflow plays its held-out games: ε is there to vary
# the games θ learns from, and a random step of a test game measures nothing but its damage (a CookingWorld
# meal eaten or an ingredient cut wrong loses the game).
TEST_GAMES = ("--explore-epsilon", "0")


def setting_overrides(pairs: list[str]) -> dict[str, str]:
    """`group.name=value` pairs as the environment variables that set them, each checked against Settings."""
    out: dict[str, str] = {}
    defaults = Settings()
    for pair in pairs:
        key, eq, value = pair.partition("=")
        group, dot, name = key.strip().partition(".")
        if not eq or not dot:
            raise ValueError(f"--set {pair!r}: expected group.name=value, e.g. learner.lr=0.001")
        model = getattr(defaults, group, None)
        if not isinstance(model, BaseModel):
            groups = [k for k, v in defaults if isinstance(v, BaseModel)]
            raise ValueError(f"--set {pair!r}: no settings group {group!r}; groups: {', '.join(groups)}")
        if name not in type(model).model_fields:
            raise ValueError(f"--set {pair!r}: {group} has no setting {name!r}; "
                             f"it has {', '.join(type(model).model_fields)}")
        try:
            type(model).model_validate({**model.model_dump(), name: value})
        except ValidationError as exc:
            raise ValueError(f"--set {pair!r}: {exc.errors()[0]['msg']}") from None
        out[f"EVOSKILL_{group.upper()}__{name.upper()}"] = value
    return out


@dataclass(frozen=True)
class Choice:
    """`--choose group.name=V1,V2,...`: the values of one setting, to be chosen between on the dev fold."""

    setting: str  # group.name
    variable: str  # the environment variable that sets it
    values: tuple[str, ...]

    @classmethod
    def parse(cls, text: str) -> Choice:
        setting, eq, listed = text.partition("=")
        values = tuple(v.strip() for v in listed.split(",") if v.strip())
        if not eq or len(values) < 2:
            raise ValueError(f"--choose {text!r}: expected group.name=V1,V2 (two values or more), "
                             "e.g. learner.rename_share=0,0.5")
        variables = {next(iter(setting_overrides([f"{setting.strip()}={v}"]))) for v in values}  # each checked
        return cls(setting.strip(), variables.pop(), values)


def choose_theta(choice: Choice, suite: Suite, budget: Budget, seed: int, library: Path,
                 processes: dict[str, str], folder: Path,
                 console: Console) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    """θ trained with each of `choice.values` on a stack of its own under `folder`, each played alone on the
    dev fold; returns the folder of the best by dev mean score (ties: the first), the record of the choice and
    the chosen candidate's own."""
    candidates = []
    for i, value in enumerate(choice.values):
        here = folder / f"choose-{i}"
        with stack(here, {**processes, choice.variable: value}) as env:
            version, losses, online, checks = train_theta(suite.env, budget, seed, library, env, here)
            played = on_dev_fold(suite.env, budget, env, here / "eval-dev-policy.json", version)
        candidates.append({"value": value, "folder": here.name, "policy_version": version, "losses": losses,
                           "online_epochs": online, "dev_checks": checks, **played})
        console.print(f"seed {seed}, {choice.setting}={value}: θ {version} alone on the dev fold: "
                      f"score {candidates[-1]['dev_score']:.3f}, success {candidates[-1]['dev_success']:.0%}")
    best = max(range(len(candidates)), key=lambda i: (candidates[i]["dev_score"], -i))
    console.print(f"seed {seed}: {choice.setting}={candidates[best]['value']} chosen on the dev fold")
    record = {"setting": choice.setting, "chosen": candidates[best]["value"], "candidates": candidates}
    return folder / f"choose-{best}", record, candidates[best]


def shared_game_cache(overrides: dict[str, str]) -> dict[str, str]:
    """The caller's tw-make game cache for the library and every seed's stack: a stack's default is under its
    fresh state folder, where each seed would build every test game again. A cache set by --set or in the
    environment is kept; the folder stays out of the recorded settings."""
    if GAME_CACHE_VAR in overrides or GAME_CACHE_VAR in os.environ:
        return {}
    from evoskill.sandbox.service import envs_cache_dir  # the sandbox's own default, not its gRPC at import

    return {GAME_CACHE_VAR: str(envs_cache_dir(Settings()))}


# Each agent's row in the tables and summaries.
ROW_LABELS: dict[AgentKind, str] = {
    AgentKind.RANDOM: "random", AgentKind.MCTS: "uniform-prior MCTS", AgentKind.POLICY_MCTS: "θ + MCTS (policy+mcts)",
    AgentKind.POLICY: "θ alone (policy)",
}


def row_name(label: str) -> str:
    """A row's label without its agent kind: "θ + MCTS (policy+mcts)" -> "θ + MCTS"."""
    return label.split(" (")[0]


def agent_rows(budget: Budget, agents: Sequence[str] = AGENTS) -> list[AgentRow]:
    """The rows of the agents asked for, in the table's order (θ's rows depend on θ; the others do not)."""
    unknown = sorted(set(agents) - set(AGENTS))
    if unknown or not agents:
        raise ValueError(f"--agents {','.join(agents)}: expected some of {', '.join(AGENTS)}")
    return [AgentRow(ROW_LABELS[a], budget.simulations if a.searches else 0) for a in AGENTS if a in agents]


def library_tally(path: Path) -> dict[str, Any]:
    """A library reused from an earlier run (`--library`), tallied as `evoskill demos --json` reports one (no
    time spent, no environment step); a bad line fails here, named by its number."""
    from evoskill.library.generate import Throughput
    from evoskill.library.jsonl import read_jsonl

    tally = Throughput()
    for episode in read_jsonl(path):
        tally.add(episode, 0)
    return {**tally.to_json(), "reused": str(path)}


def run_quality_bench(suite: Suite, quick: bool, seeds: int, workers: int, overrides: dict[str, str],
                      work_dir: Path, json_path: Path | None, library_from: Path | None = None,
                      agents: Sequence[str] = AGENTS, first_seed: int = 0,
                      choice: Choice | None = None) -> dict[str, Any]:
    console = Console() if sys.stdout.isatty() else Console(width=140)
    git_revision()  # read now, as the stacks start: the summary names the code that ran, not what main is by its end
    budget = suite.pick(quick)
    rows = agent_rows(budget, agents)
    args = EvalArgs(suite.env, budget.test_episodes, budget.max_steps, budget.parallel)
    console.print(f"[bold]{suite.name}[/] ({suite.env}){' --quick' if quick else ''}: {budget.describe()}")
    started = time.perf_counter()
    processes = {**overrides, **shared_game_cache(overrides)}  # what every process runs with
    library, demos = offline_library(console, suite, budget, workers, processes, work_dir, library_from)
    wall = {"library_s": time.perf_counter() - started}

    by_agent = dict(zip((a for a in AGENTS if a in agents), rows, strict=True))
    theta_rows = [(by_agent[a], a) for a in (AgentKind.POLICY_MCTS, AgentKind.POLICY) if a in by_agent]
    baselines = [by_agent[a] for a in (AgentKind.RANDOM, AgentKind.MCTS) if a in by_agent]
    trained: list[dict[str, Any]] = []
    for seed in range(first_seed, first_seed + (seeds if theta_rows else 1)):
        folder, stack_settings, chosen, picked = work_dir / f"seed-{seed}", processes, None, None
        seed_started = time.perf_counter()
        if choice is not None and theta_rows:  # θ's stack is the chosen value's, started again on what it left
            folder, chosen, picked = choose_theta(choice, suite, budget, seed, library, processes, folder, console)
            stack_settings = {**processes, choice.variable: picked["value"]}
        with stack(folder, stack_settings, fresh=picked is None) as env:
            if theta_rows:
                if picked is None:
                    version, losses, online, checks = train_theta(suite.env, budget, seed, library, env, folder)
                else:
                    version, losses, online, checks = (picked["policy_version"], picked["losses"],
                                                       picked["online_epochs"], picked["dev_checks"])
                # Where a seed's time goes: stacks, import and cloning (every candidate's with --choose), then each
                # agent's test games. On short ScienceWorld tasks the cloning is most of it.
                wall[f"seed_{seed}_train_s"] = time.perf_counter() - seed_started
                for row, agent in theta_rows:
                    clock = time.perf_counter()
                    row.record(evaluate(args, agent, row.simulations, env, folder / f"eval-{agent}.json", version,
                                        TEST_GAMES))
                    wall[f"seed_{seed}_{agent}_s"] = time.perf_counter() - clock
                trained.append({"seed": seed, "policy_version": version, "losses": losses, "online_epochs": online,
                                **({"dev_checks": checks} if checks else {}), **({"choice": chosen} if chosen else {})})
                if checks:
                    console.print(f"seed {seed}: cloning on the dev fold: " + ", ".join(
                        f"{c['steps']} steps {c['dev_score']:.3f}" for c in checks) + f"; θ {version} serves")
                console.print(f"seed {seed}: θ {version}: " + ", ".join(
                    f"{agent} {row.success[-1]:.0%}" for row, agent in theta_rows))
            if seed == first_seed:
                play_baseline_rows(args, baselines, env, folder, TEST_GAMES)
        now = time.perf_counter()
        wall[f"seed_{seed}_s"], wall["total_s"] = now - seed_started, now - started
        result = quality_summary(suite, quick, rows, demos, trained, wall, overrides)
        if json_path is not None:  # rewritten after each seed: a run of hours stopped in its last seed keeps the others
            write_report(json_path, result, Settings())
            console.print(f"wrote {json_path} (seeds {result['seeds']})")
    show_quality(console, result)
    return result


def offline_library(console: Console, suite: Suite, budget: Budget, workers: int, processes: dict[str, str],
                    work_dir: Path, library_from: Path | None) -> tuple[Path, dict[str, Any]]:
    """`work_dir` made anew with the offline library in it: the suite's train-fold gold paths (`evoskill demos`),
    or a copy of `library_from`. Returns its path and its tally."""
    shutil.rmtree(work_dir, ignore_errors=True)
    work_dir.mkdir(parents=True)
    library, log, plain = work_dir / "library.jsonl", work_dir / "bench.log", dict(os.environ, **processes)
    if library_from is not None:
        shutil.copyfile(library_from, library)
        demos = library_tally(library)
    else:
        _cli("demos", "--env", suite.env, "--fold", "train", "--episodes", str(budget.library_episodes),
             "--workers", str(workers), "--out", str(library), "--json", str(work_dir / "demos.json"),
             *(["--shorten"] if budget.shorten_library else []), env=plain, log=log)
        demos = json.loads((work_dir / "demos.json").read_text())
    console.print(f"library: {demos['episodes']} gold paths ({demos['won']} won, {demos['steps']} steps, "
                  f"{demos.get('unlisted', 0)} of them outside the environment's listed actions) in "
                  f"{demos['seconds']:.0f}s, {demos['episodes_per_s']:.1f} episodes/s")
    return library, demos


class Trained(NamedTuple):
    version: str  # the θ that serves at the end
    losses: dict[str, float]  # the cloning's (of the θ it kept)
    online: list[dict[str, Any]]  # the online epochs' records: which θ each evaluated on the dev games, how it did
    dev_checks: list[dict[str, Any]]  # the cloning's checks on the dev fold (`Budget.dev_check_steps`), if any


def train_theta(env_spec: str, budget: Budget, seed: int, library: Path | None, env: dict[str, str],
                folder: Path) -> Trained:
    """θ of one seed on the stack `env` reaches: the library imported, behaviour cloning on it, then the
    online epochs where the budget has them.

    Without a library (the ablation's "no offline data"): a fresh θ trained by online epochs alone, as many
    learner steps in all as the cloning and the online epochs would have taken (`online_only`)."""
    log = folder / "bench.log"
    version, epochs, reply, checks = "", list[dict[str, Any]](), dict[str, Any](), list[dict[str, Any]]()
    if library is None:  # keep_best off: the untrained θ it would start from is no evidence to keep
        train_args = [*budget.train_args(env_spec, "", seed, *online_only(budget)), "--no-keep-best"]
    else:
        _cli("library", "import", str(library), env=env, log=log)
        version, reply, checks = clone(env_spec, budget, seed, env, folder)
        train_args = budget.train_args(env_spec, version, seed)
    if budget.online_epochs or library is None:
        report_dir = folder / "report"
        _cli("train", *train_args, "--workflow-id", f"quality-{seed}", "--report-dir", str(report_dir), env=env,
             log=log)
        report = json.loads((report_dir / "report.json").read_text())
        version = str(report["policy_version"])
        epochs = [{k: m.get(k) for k in ("epoch", "stage", "train_success", "eval_success", "eval_mean_score",
                                         "policy_version", "serving_version", "note")}
                  for m in report.get("history", [])]
    return Trained(version, {k: float(v) for k, v in reply.get("losses", {}).items()}, epochs, checks)


def clone(env_spec: str, budget: Budget, seed: int, env: dict[str, str],
          folder: Path) -> tuple[str, dict[str, Any], list[dict[str, Any]]]:
    """Behaviour cloning on the imported library, `budget.gradient_steps` learner steps. With
    `budget.dev_check_steps` (0 < n < gradient_steps): θ after n steps and θ at the end each play the dev games
    alone, and the better by mean score (ties: the earlier) is returned. Returns the version, its `library train`
    reply and the checks made (empty without)."""
    n = budget.dev_check_steps
    chunks = [n, budget.gradient_steps - n] if 0 < n < budget.gradient_steps else [budget.gradient_steps]
    done, checks, replies = 0, list[dict[str, Any]](), list[dict[str, Any]]()
    for i, steps in enumerate(chunks):
        out, log = folder / ("train.json" if i == 0 else f"train-{i}.json"), folder / "bench.log"
        # Seed 0 would keep the learner's own draws: every training seed reseeds them (seed + 1); a later chunk
        # reseeds them otherwise, or it would draw the first chunk's batches again.
        _cli("library", "train", "--steps", str(steps), "--batch-size", str(budget.batch_size),
             "--seed", str(seed + 1 + 1000 * i), "--json", str(out), env=env, log=log)
        replies.append(json.loads(out.read_text()))
        done += steps
        if len(chunks) > 1:
            version = str(replies[-1]["policy_version"])
            checks.append({"steps": done, "policy_version": version,
                           **on_dev_fold(env_spec, budget, env, folder / f"eval-dev-{done}.json", version)})
    best = max(range(len(checks)), key=lambda i: (checks[i]["dev_score"], -i)) if checks else 0
    return str(replies[best]["policy_version"]), replies[best], checks


def on_dev_fold(env_spec: str, budget: Budget, env: dict[str, str], out: Path, version: str) -> dict[str, Any]:
    """θ `version` alone on the budget's dev games: the mean score and success of the games played to their end,
    how many were asked for, and how many the services lost (an error, not θ's play: counted as 0, two lost games
    made a loaded run's check choose the worse θ)."""
    dev = EvalArgs(env_spec, budget.train_eval_episodes, budget.max_steps, budget.parallel)
    report = evaluate(dev, AgentKind.POLICY, 0, env, out, version, extra=["--fold", "dev"])
    episodes = report.get("episodes", [])
    played = [e for e in episodes if not e.get("error")] or [{"score": 0.0, "won": False}]  # none played: 0
    return {"dev_score": float(np.mean([float(e["score"]) for e in played])),
            "dev_success": float(np.mean([bool(e["won"]) for e in played])), "dev_episodes": dev.episodes,
            "dev_lost": sum(bool(e.get("error")) for e in episodes)}


def online_only(budget: Budget) -> tuple[int, int]:
    """Epochs and learner steps per epoch of θ trained without the library: the budget's online epochs (one
    where it has none), with the learner steps of the cloning and of those epochs spread over them."""
    epochs = max(budget.online_epochs, 1)
    total = budget.gradient_steps + budget.online_epochs * budget.online_train_steps
    return epochs, max(-(-total // epochs), 1)


def scienceworld_scale(env: str, entry: Mapping[str, Any]) -> dict[str, float]:
    """A ScienceWorld row's mean score and sd on its own scale, the anchors' (the normalised score × 100)."""
    if not env.startswith("sciworld:"):
        return {}
    return {"score_scienceworld_mean": 100 * entry["score_mean"], "score_scienceworld_sd": 100 * entry["score_sd"]}


def show_scienceworld_scale(console: Console, rows: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
    own = [f"{name} {row['score_scienceworld_mean']:.1f} ± {row['score_scienceworld_sd']:.1f}"
           for name, row in rows if "score_scienceworld_mean" in row]
    if own:
        console.print("score on ScienceWorld's scale (0-100; the adapter reads a failure's -100 as 0): "
                      + ", ".join(own))


def quality_summary(suite: Suite, quick: bool, rows: list[AgentRow], demos: dict[str, Any],
                    trained: list[dict[str, Any]], wall: dict[str, float], overrides: dict[str, str]) -> dict[str, Any]:
    agents = []
    for row in rows:
        entry: dict[str, Any] = {"agent": row.agent, "simulations": row.simulations, "runs": len(row.success),
                                 "failed_episodes": sum(row.errors)}
        per_step = [e / s for e, s in zip(row.env_steps, row.steps, strict=False) if s]
        for name, values in (("success", row.success), ("score", row.score), ("env_steps", row.env_steps),
                             ("env_steps_per_step", per_step), ("planner_share", row.planner_share),
                             ("walks_back", row.walks_back)):
            mean, sd = row.mean_sd(values) if values else (0.0, 0.0)
            entry.update({name: values, f"{name}_mean": mean, f"{name}_sd": sd})
        entry.update(scienceworld_scale(suite.env, entry))
        agents.append(entry)
    by_name = {row_name(a["agent"]): a for a in agents}
    comparisons = {}
    for better, worse, name in (("θ + MCTS", "uniform-prior MCTS", "theta_search_minus_uniform"),
                                ("θ alone", "random", "theta_alone_minus_random")):
        if better in by_name and worse in by_name:
            for figure in ("success", "score"):
                comparisons[f"{name}_{figure}"] = by_name[better][f"{figure}_mean"] - by_name[worse][f"{figure}_mean"]
    return {
        "suite": suite.to_json(quick), "env": suite.env, "seeds": [t["seed"] for t in trained], "settings": overrides,
        "library": demos, "trained": trained, "agents": agents, "wall_time_s": wall,
        "within_budget": wall.get("total_s", 0.0) <= suite.pick(quick).wall_time_s,
        "comparisons": comparisons,
    }


def show_quality(console: Console, result: dict[str, Any]) -> None:
    suite = result["suite"]
    budget = Budget(**suite["budget"])
    table = Table(title=f"{suite['name']}{' (quick)' if suite['quick'] else ''}: {result['env']}, "
                        f"test fold, seeds {result['seeds']}")
    for column in ("agent", "simulations", "runs", "success mean ± sd", "score mean ± sd", "env steps mean ± sd",
                   "env steps per real step", "planner share", "walks back a game"):
        table.add_column(column)
    for a in result["agents"]:
        table.add_row(a["agent"], str(a["simulations"] or "–"), str(a["runs"]),
                      f"{a['success_mean']:.0%} ± {a['success_sd']:.0%}",
                      f"{a['score_mean']:.3f} ± {a['score_sd']:.3f}",
                      f"{a['env_steps_mean']:.0f} ± {a['env_steps_sd']:.0f}",
                      f"{a.get('env_steps_per_step_mean', 0.0):.0f}", f"{a.get('planner_share_mean', 0.0):.0%}",
                      f"{a.get('walks_back_mean', 0.0):.1f}")
    console.print(table)
    wall = result["wall_time_s"]
    console.print(f"budget: {budget.describe()}")
    console.print(f"wall time: {wall.get('total_s', 0.0) / 60:.1f} min (library {wall.get('library_s', 0.0):.0f}s)"
                  f"{'' if result['within_budget'] else ' — over the budget'}; baselines are played once "
                  "(they do not depend on θ)")
    show_scienceworld_scale(console, [(a["agent"], a) for a in result["agents"]])
    for t in result["trained"]:
        if choice := t.get("choice"):
            console.print(f"seed {t['seed']}: {choice['setting']}={choice['chosen']} chosen on the dev fold ("
                          + ", ".join(f"{c['value']}: {c['dev_score']:.3f}" for c in choice["candidates"]) + ")")
    c = result["comparisons"]
    said = [f"{label}: {c[name + '_success']:+.0%} success, {c[name + '_score']:+.3f} score"
            for label, name in (("θ+MCTS − uniform MCTS", "theta_search_minus_uniform"),
                                ("θ alone − random", "theta_alone_minus_random")) if name + "_success" in c]
    if said:
        console.print(" · ".join(said))
    if suite.get("note"):
        console.print(suite["note"])
