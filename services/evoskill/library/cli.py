"""`evoskill demos` (gold paths from the environments) and `evoskill library import|export|train` (the
learner's offline library as JSONL, and behaviour cloning on it)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from evoskill.cli_choices import Fold, output_file
from evoskill.events.v1 import events_pb2
from evoskill.platform.config import Settings
from evoskill.platform.provenance import write_report

library_app = typer.Typer(help="The learner's offline library: JSONL in and out, and training θ on it.",
                          no_args_is_help=True)


async def _each(episodes: Iterable[events_pb2.EpisodeCompleted]) -> AsyncIterator[Any]:
    """The episodes as ImportEpisodes requests; a blocking source (files, generator workers) runs in a thread."""
    from evoskill.learner.v1 import learner_pb2

    it = iter(episodes)
    while (episode := await asyncio.to_thread(next, it, None)) is not None:
        yield learner_pb2.ImportEpisodesRequest(episode=episode)


@contextlib.asynccontextmanager
async def learner_stub(settings: Settings, say: Callable[[str], None]) -> AsyncIterator[Any]:
    """A LearnerServiceStub of the running learner, or of the embedded stack brought up for the command."""
    from evoskill.clients.episodes import services
    from evoskill.learner.v1 import learner_pb2_grpc
    from evoskill.platform.rpc import channel, check_health

    async with contextlib.AsyncExitStack() as up:
        if not await check_health(settings.endpoint("learner").target, settings=settings.grpc):
            await up.enter_async_context(services(settings, say))
        ch = await up.enter_async_context(channel(settings.endpoint("learner").target, settings.grpc))
        yield learner_pb2_grpc.LearnerServiceStub(ch)


async def send_to_learner(stub: Any, episodes: Iterable[events_pb2.EpisodeCompleted]) -> Any:
    """Stream `episodes` into the learner's offline library; returns its ImportEpisodesReply."""
    return await stub.ImportEpisodes(_each(episodes))


def _say_imported(reply: Any) -> None:
    from evoskill.cli_support import console

    console.print(f"learner: {reply.stored} stored, {reply.duplicates} already there; the offline library holds "
                  f"{reply.library_episodes} episodes, {reply.library_steps} steps")


def _progress_due(done: int, total: int) -> bool:
    """Whether a progress line is due after `done` of `total` episodes: about every 5%, and the last."""
    return done == total or done % max(1, total // 20) == 0


def demos(
    env: Annotated[str, typer.Option(help="environment spec, e.g. 'twx:cookingworld?numLocations=1'")],
    episodes: Annotated[int, typer.Option(min=1, help="games, one gold path each (seeds start-seed, start-seed+1, "
                                                      "...)")],
    fold: Fold = Fold.TRAIN,
    start_seed: Annotated[int, typer.Option(min=0)] = 0,
    workers: Annotated[int, typer.Option(min=1, help="worker processes, one environment each")] = 2,
    out: Annotated[Path | None, typer.Option(callback=output_file,
                                             help="write the episodes here as JSONL (docs/library.md)")] = None,
    to_learner: Annotated[bool, typer.Option("--to-learner", help="store them in the stack's offline library")] = False,
    seen: Annotated[bool, typer.Option(help="mark candidates leading back to a visited state (steps every child)")]
    = True,
    max_steps: Annotated[int, typer.Option(min=1, help="gold-path steps per episode at most")] = 1000,
    shorten: Annotated[bool, typer.Option("--shorten", help="play each gold path without the steps its outcome does "
                                                            "not need, each change checked by playing it")] = False,
    json_path: Annotated[Path | None, typer.Option("--json", callback=output_file, help="write the throughput here")]
    = None,
) -> None:
    """Gold-path demonstrations straight from the environment, in parallel; prints episodes/s and steps/s."""
    from rich.progress import Progress

    from evoskill.cli_support import checked_env, console, fail, run_client
    from evoskill.library.generate import Throughput, generate
    from evoskill.library.jsonl import write_jsonl

    if out is None and not to_learner:
        fail("nowhere to put the episodes: give --out FILE.jsonl and/or --to-learner", 2)
    checked_env(env)
    settings = Settings()
    tally = Throughput()
    seeds = range(start_seed, start_seed + episodes)

    def produced(progress: Progress) -> Iterator[events_pb2.EpisodeCompleted]:
        task = progress.add_task(f"gold paths of {env} ({fold})", total=episodes)
        with out.open("w", encoding="utf-8") if out else contextlib.nullcontext() as sink:
            for episode in generate(env, fold.value, seeds, workers=workers, seen=seen, max_steps=max_steps,
                                    settings=settings, throughput=tally, shorten=shorten):
                if sink is not None:
                    write_jsonl([episode], sink)
                progress.advance(task)
                if not console.is_terminal and _progress_due(tally.episodes, episodes):  # no live bar in a log
                    console.print(f"{tally.episodes}/{episodes} gold paths ({tally.won} won) in {tally.seconds:.0f}s")
                yield episode

    with Progress(console=console) as progress:
        if to_learner:
            async def main() -> None:
                async with learner_stub(settings, console.print) as stub:
                    _say_imported(await send_to_learner(stub, produced(progress)))

            run_client(main)
        else:
            for _ in produced(progress):
                pass
    figures = tally.to_json()
    console.print(f"{figures['episodes']} episodes ({figures['won']} won), {figures['steps']} steps "
                  f"({figures['unlisted']} of them taking an action the environment does not list), "
                  f"{figures['env_steps']} environment steps in {figures['seconds']:.1f}s with {workers} worker(s): "
                  f"[bold]{figures['episodes_per_s']:.1f} episodes/s, {figures['steps_per_s']:.0f} steps/s[/] "
                  f"({figures['env_steps_per_s']:.0f} environment steps/s)")
    if out is not None:
        console.print(f"wrote {out}")
    if json_path is not None:
        write_report(json_path, {"env": env, "fold": fold, "start_seed": start_seed, "seeds": list(seeds),
                                 "workers": workers, "seen": seen, "max_steps": max_steps, "shorten": shorten,
                                 **figures}, settings)


@library_app.command("import")
def import_cmd(
    path: Annotated[Path, typer.Argument(help="JSONL, one episode per line (docs/library.md)", exists=True,
                                         dir_okay=False)],
) -> None:
    """Check every line, then store the episodes durably in the learner's offline library."""
    from evoskill.cli_support import console, fail, run_client
    from evoskill.library.jsonl import LibraryFormatError, read_jsonl

    try:
        lines = sum(1 for _ in read_jsonl(path))  # every line checked before anything is stored
    except LibraryFormatError as exc:
        fail(str(exc), 2)
    console.print(f"{path}: {lines} episodes, every line valid")
    settings = Settings()

    async def main() -> None:
        async with learner_stub(settings, console.print) as stub:
            _say_imported(await send_to_learner(stub, read_jsonl(path)))

    run_client(main)


@library_app.command("export")
def export_cmd(
    out: Annotated[Path | None, typer.Option(callback=output_file, help="default: standard output")] = None,
    include_online: Annotated[bool, typer.Option(help="the online buffer's episodes too")] = False,
) -> None:
    """Write the learner's offline library as JSONL (what `library import` reads)."""
    from evoskill.cli_support import err, run_client
    from evoskill.learner.v1 import learner_pb2
    from evoskill.library.jsonl import write_jsonl

    settings = Settings()

    async def main() -> None:
        async with learner_stub(settings, err.print) as stub:
            stream = stub.ExportEpisodes(learner_pb2.ExportEpisodesRequest(include_online=include_online))
            with out.open("w", encoding="utf-8") if out else contextlib.nullcontext(sys.stdout) as sink:
                n = 0
                async for episode in stream:
                    n += write_jsonl([episode], sink)
        err.print(f"exported {n} episodes" + (f" to {out}" if out else ""))

    run_client(main)


@library_app.command("train")
def train_cmd(
    steps: Annotated[int, typer.Option(min=1, help="gradient steps")],
    batch_size: Annotated[int, typer.Option(min=0, help="0 = learner.batch_size")] = 0,
    online_fraction: Annotated[float | None, typer.Option(min=0.0, max=1.0, help="share of each batch from online "
                                                          "experience (default learner.online_fraction)")] = None,
    seed: Annotated[int, typer.Option(min=0)] = 0,
    json_path: Annotated[Path | None, typer.Option("--json", callback=output_file,
                                                   help="write the reply (version, losses) here")] = None,
) -> None:
    """Train θ on the learner's replay (the offline library alone while no episode was played): behaviour
    cloning on demonstrations. Publishes the next policy version."""
    from google.protobuf.json_format import MessageToDict

    from evoskill.cli_support import console, run_client
    from evoskill.learner.v1 import learner_pb2

    settings = Settings()

    async def main() -> None:
        async with learner_stub(settings, console.print) as stub:
            reply = await stub.Train(learner_pb2.TrainRequest(steps=steps, batch_size=batch_size, seed=seed,
                                                              online_fraction=online_fraction))
        losses = ", ".join(f"{k} {v:.3f}" for k, v in sorted(reply.losses.items()))
        console.print(f"{reply.policy_version}: {reply.steps} steps on {reply.replay_episodes} episodes "
                      f"({reply.replay_size} steps in replay); {losses}")
        if json_path is not None:
            asked = {"steps": steps, "batch_size": batch_size, "seed": seed, "online_fraction": online_fraction}
            write_report(json_path, {**MessageToDict(reply, preserving_proto_field_name=True), "request": asked},
                         settings)

    run_client(main)
