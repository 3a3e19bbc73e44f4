"""`evoskill export --format sft|preference --json FILE`: the episodes the learner trained on (its replay: the
offline library and the online buffer), or a library file, as chat-format JSONL for TRL (docs/export.md).

The conversion is library/finetune.py; here the episodes are read (through the learner, as `library export`
reads them) and the tool schemas of `tools:` episodes are asked of their environment."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any

import typer

from evoskill.cli_choices import ExportFold, ExportFormat, output_file
from evoskill.platform.config import Settings

if TYPE_CHECKING:  # the conversion (and torch, through core/learn) is imported when the command runs
    from evoskill.events.v1.events_pb2 import EpisodeCompleted
    from evoskill.library.finetune import ExportOptions, ExportTally, Row, ToolsOf

TOOL_SCHEMES = ("tools", "bfcl")  # their envs list their tools' schemas (tools())


class EnvTools:
    """The tool schemas of a `tools:` or `bfcl:` episode's task, from its environment (one env per spec, one reset
    per game)."""

    def __init__(self) -> None:
        self._envs: dict[str, Any] = {}
        self._schemas: dict[tuple[str, str, int], list[dict[str, Any]]] = {}

    def __call__(self, episode: EpisodeCompleted) -> list[dict[str, Any]] | None:
        from evoskill.envs import make_env, parse_spec
        from evoskill.library.finetune import tool_schemas

        if parse_spec(episode.env_spec, validate=False).scheme not in TOOL_SCHEMES:
            return None
        key = (episode.env_spec, episode.fold, episode.seed)
        if key not in self._schemas:
            env = self._envs.get(episode.env_spec) or self._envs.setdefault(episode.env_spec,
                                                                             make_env(episode.env_spec))
            env.reset(episode.seed, episode.fold)
            self._schemas[key] = tool_schemas(env.tools())
        return self._schemas[key]

    def close(self) -> None:
        for env in self._envs.values():
            env.close()
        self._envs.clear()


@contextlib.contextmanager
def _sink(path: Path | None) -> Iterator[IO[str]]:
    """Standard output, or `path` written whole or not at all (a failed export leaves no half file)."""
    if path is None:
        yield sys.stdout
        return
    tmp = path.with_name(path.name + ".tmp")
    try:
        with tmp.open("w", encoding="utf-8") as out:
            yield out
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_rows(rows: Iterable[Row], out: IO[str]) -> None:
    for row in rows:
        out.write(json.dumps(row, ensure_ascii=False) + "\n")


def export(
    format_: Annotated[ExportFormat, typer.Option("--format", help="sft (state → chosen action) or preference "
                                                                   "(chosen vs rejected by the search's Q)")],
    json_path: Annotated[Path | None, typer.Option("--json", help="write the JSONL here (default: standard output)",
                                                   dir_okay=False, callback=output_file)] = None,
    source: Annotated[Path | None, typer.Option("--from", help="a library JSONL file (docs/library.md) instead of "
                                                "the learner's replay", exists=True, dir_okay=False)] = None,
    won_only: Annotated[bool | None, typer.Option("--won-only/--all-episodes", help="only won episodes (default: "
                                                  "on for sft, off for preference)", show_default=False)] = None,
    fold: Annotated[ExportFold, typer.Option(help="a fold, or any")] = ExportFold.TRAIN,
    env: Annotated[str | None, typer.Option(help="only this environment spec, as the episodes name it")] = None,
    q_margin: Annotated[float | None, typer.Option(min=0, help="preference: how much lower a rejected action's Q "
                                                               "must be, in reward units (default 0.1)")] = None,
    pairs_per_state: Annotated[int, typer.Option(min=1, help="preference: rejected actions per searched step at "
                                                             "most")] = 1,
    limit: Annotated[int | None, typer.Option(min=1, help="rows at most")] = None,
    offline_only: Annotated[bool, typer.Option("--offline-only", help="the learner's offline library alone, "
                                                                      "without the online buffer")] = False,
    tools: Annotated[bool, typer.Option(help="a tools column for tool tasks (starts their tools to list them)")]
    = True,
    tool_calls: Annotated[bool, typer.Option("--tool-calls", help="tool tasks' answers as tool_calls messages, "
                                                                  "not the action text")] = False,
) -> None:
    """Write search results as JSONL for TRL's SFT or DPO trainer (one row per step; docs/export.md)."""
    from evoskill.cli_support import err, fail, run_client
    from evoskill.library.finetune import Q_MARGIN, ExportOptions, ExportTally, export_rows
    from evoskill.library.jsonl import LibraryFormatError, read_jsonl

    if tool_calls and not tools:
        fail("--tool-calls needs the tools column: drop --no-tools", 2)
    try:
        options = ExportOptions(format=format_.value, won_only=won_only,
                                fold=None if fold is ExportFold.ANY else fold.value, env=env,
                                q_margin=Q_MARGIN if q_margin is None else q_margin,
                                pairs_per_state=pairs_per_state, limit=limit, tool_calls=tool_calls)
    except ValueError as exc:
        fail(str(exc), 2)
    tally = ExportTally()
    env_tools = EnvTools() if tools else None
    try:
        with _sink(json_path) as out:
            if source is not None:
                try:
                    write_rows(export_rows(read_jsonl(source), options, env_tools, tally), out)
                except LibraryFormatError as exc:
                    fail(str(exc), 2)
            else:
                run_client(lambda: _from_learner(Settings(), not offline_only, options, env_tools, tally, out))
    finally:
        if env_tools is not None:
            env_tools.close()
    skipped = ", ".join(f"{n} {why}" for why, n in sorted(tally.by_reason.items()))
    err.print(f"{tally.rows} {format_} rows from {tally.kept} of {tally.episodes} episodes ({tally.steps} steps, "
              f"{tally.searched_steps} searched)" + (f"; left out: {skipped}" if skipped else "")
              + (f"; wrote {json_path}" if json_path else ""))


async def _from_learner(settings: Settings, include_online: bool, options: ExportOptions, env_tools: ToolsOf | None,
                        tally: ExportTally, out: IO[str]) -> None:
    """The learner's stored episodes, oldest first, through `library export`'s path (a running stack or the
    embedded one), converted as they stream in."""
    from evoskill.cli_support import err
    from evoskill.learner.v1 import learner_pb2
    from evoskill.library.cli import learner_stub
    from evoskill.library.finetune import export_rows

    async with learner_stub(settings, err.print) as stub:
        async for episode in stub.ExportEpisodes(learner_pb2.ExportEpisodesRequest(include_online=include_online)):
            write_rows(export_rows([episode], options, env_tools, tally), out)
            if tally.reached(options.limit):
                break
