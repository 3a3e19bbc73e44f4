"""`evoskill memory list|search|show|export|import|delete|purge|stats|compact`: the experience units of the
memory and its two tiers, through its RPCs (the running memory service, else the store served in this
process: clients/memory.py)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from evoskill.platform.config import Settings

if TYPE_CHECKING:
    from evoskill.memory.v1 import memory_pb2

memory_app = typer.Typer(help="The memory's experience units: list, search, show, export, import, delete, purge; "
                         "its hot and cold tiers: stats, compact.", no_args_is_help=True)

# --filter KEY=VALUE: the key as a user says it -> the MemoryFilter field.
FILTER_KEYS = {"env": "env_spec", "family": "env_family", "episode": "episode_id", "template": "template",
               "session": "session_id", "outcome": "outcomes"}
OUTCOME_NAMES = ("pending", "won", "lost")
PAGE = 500  # units per List call of export and import
FilterOption = Annotated[list[str], typer.Option(
    "--filter", help=f"KEY=VALUE, repeatable; keys: {', '.join(FILTER_KEYS)} (outcome: "
                     f"{'|'.join(OUTCOME_NAMES)}, comma-separated for several)")]


def _run(main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Bad input ends in one line and exit 2, an unreachable memory in one line and exit 1."""
    import grpc

    from evoskill.cli_support import fail
    from evoskill.clients.memory import MemoryUnavailable
    from evoskill.core.errors import InvalidInput

    try:
        asyncio.run(main())
    except grpc.aio.AioRpcError as exc:
        fail(f"{exc.code().name}: {exc.details()}", 2 if exc.code() == grpc.StatusCode.INVALID_ARGUMENT else 1)
    except InvalidInput as exc:
        fail(str(exc), 2)
    except MemoryUnavailable as exc:
        fail(str(exc))


def _stub(settings: Settings) -> Any:
    from evoskill.cli_support import err
    from evoskill.clients.memory import memory_stub

    return memory_stub(settings, err.print)


def parse_filter(items: list[str]) -> memory_pb2.MemoryFilter:
    """`--filter` values as a MemoryFilter; a bad one is exit 2 naming it."""
    from evoskill.cli_support import fail
    from evoskill.memory.v1 import memory_pb2

    flt = memory_pb2.MemoryFilter()
    outcomes = (memory_pb2.OUTCOME_PENDING, memory_pb2.OUTCOME_WON, memory_pb2.OUTCOME_LOST)  # as OUTCOME_NAMES
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or key not in FILTER_KEYS or not value:
            fail(f"--filter {item!r}: expected KEY=VALUE with KEY one of {', '.join(FILTER_KEYS)}", 2)
        if key != "outcome":
            setattr(flt, FILTER_KEYS[key], value)
            continue
        for name in value.split(","):
            if name not in OUTCOME_NAMES:
                fail(f"--filter {item!r}: outcome {name!r} is not one of {', '.join(OUTCOME_NAMES)}", 2)
            flt.outcomes.append(outcomes[OUTCOME_NAMES.index(name)])
    return flt


def _described(flt: memory_pb2.MemoryFilter) -> str:
    from google.protobuf import json_format

    fields = json_format.MessageToDict(flt, preserving_proto_field_name=True)
    return ", ".join(f"{k}={v}" for k, v in fields.items()) or "no filter"


def _outcome(e: memory_pb2.Experience) -> str:
    return OUTCOME_NAMES[e.outcome] if 0 <= e.outcome < len(OUTCOME_NAMES) else str(e.outcome)


def _short(text: str, width: int = 48) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


@memory_app.command("list")
def list_cmd(
    filters: FilterOption = [],  # noqa: B006 (typer reads the default; it is never mutated)
    limit: Annotated[int, typer.Option(min=1, max=1000, help="units shown at most")] = 20,
) -> None:
    """Units under the filter, in storage order: id, environment, outcome, reward, action, goal."""
    from evoskill.cli_support import console
    from evoskill.memory.v1 import memory_pb2

    flt = parse_filter(filters)

    async def main() -> None:
        async with _stub(Settings()) as stub:
            reply = await stub.List(memory_pb2.ListRequest(filter=flt, limit=limit))
        table = Table("id", "env", "outcome", "reward", "action", "goal",
                      title=f"{len(reply.experiences)} of {reply.matched} units ({_described(flt)})")
        for e in reply.experiences:
            table.add_row(e.id, e.env_spec, _outcome(e), f"{e.reward:+.2f}", _short(e.action, 32), _short(e.goal))
        console.print(table)

    _run(main)


@memory_app.command()
def search(
    query: Annotated[str, typer.Argument(help="the goal (or any text) to find similar situations for")],
    state: Annotated[str, typer.Option(help="the state, embedded after the goal as stored units are")] = "",
    profile: Annotated[str, typer.Option(help="retrieval weights by name (memory.profiles: stable, exploratory, "
                                              "...); empty = memory.profile")] = "",
    limit: Annotated[int, typer.Option(min=1, max=1000, help="results")] = 10,
    recall: Annotated[int, typer.Option(min=0, help="first-stage candidates (0 = memory.recall)")] = 0,
    diversity: Annotated[float | None, typer.Option(min=0.0, max=1.0, help="MMR trade-off (default: the "
                                                                             "profile's)")] = None,
    filters: FilterOption = [],  # noqa: B006
) -> None:
    """Retrieve as the agent does, showing both stages: the recall's cosine similarity and the formula's
    re-score (similarity + reward, outcome and novelty terms), in the returned (MMR) order; cold summaries
    (after the hot results, when those are fewer than the limit) with the experiences they stand for."""
    from evoskill.cli_support import console, fail
    from evoskill.memory.v1 import memory_pb2

    flt = parse_filter(filters)
    if flt.episode_id or flt.session_id:
        fail("search filters by env, family, template and outcome only", 2)
    request = memory_pb2.RetrieveRequest(goal=query, state=state, limit=limit, recall=recall, profile=profile,
                                         env_spec=flt.env_spec, env_family=flt.env_family, template=flt.template,
                                         outcomes=list(flt.outcomes))
    if diversity is not None:
        request.diversity = diversity

    async def main() -> None:
        async with _stub(Settings()) as stub:
            reply = await stub.Retrieve(request)
        table = Table("#", "id", "tier", "similarity (recall)", "score (formula)", "outcome", "reward", "action",
                      "state", title=f"{len(reply.results)} results for {query!r} (profile "
                                     f"{profile or 'of memory.profile'})")
        for rank, r in enumerate(reply.results, 1):
            e = r.experience
            tier = f"cold ×{r.summarised}" if r.cold else "hot"
            table.add_row(str(rank), e.id, tier, f"{r.similarity:.4f}", f"{r.score:.4f}", _outcome(e),
                          f"{e.reward:+.2f}", _short(e.action, 32), _short(e.state, 40))
        console.print(table)

    _run(main)


@memory_app.command()
def show(unit_id: Annotated[str, typer.Argument(metavar="ID", help="the unit's id, e.g. <episode_id>/<step>")]) -> None:
    """Every field of one unit."""
    from evoskill.cli_support import console, fail
    from evoskill.memory.v1 import memory_pb2

    found: list[memory_pb2.Experience] = []

    async def main() -> None:
        async with _stub(Settings()) as stub:
            found.extend((await stub.Get(memory_pb2.GetRequest(ids=[unit_id]))).experiences)

    _run(main)
    if not found:
        fail(f"no unit with id {unit_id!r} (`evoskill memory list` shows ids)")
    (e,) = found
    table = Table("field", "value", title=unit_id)
    for field in e.DESCRIPTOR.fields:
        value = getattr(e, field.name)
        if field.name == "outcome":
            value = _outcome(e)
        elif field.name == "metadata":
            value = ", ".join(f"{k}={v}" for k, v in sorted(value.items()))
        table.add_row(field.name, str(value))
    console.print(table)


@memory_app.command("export")
def export_cmd(
    path: Annotated[Path, typer.Argument(metavar="FILE.jsonl", help="written whole or not at all", dir_okay=False)],
    filters: FilterOption = [],  # noqa: B006
) -> None:
    """Write the units under the filter as JSONL, one Experience (proto JSON) a line; `import` reads it back."""
    from google.protobuf import json_format

    from evoskill.cli_support import console, fail
    from evoskill.memory.v1 import memory_pb2

    flt = parse_filter(filters)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        fail(f"{path}: cannot create its folder ({exc.strerror})", 2)
    tmp = path.with_name(path.name + ".tmp")
    written = [0]

    async def main() -> None:
        async with _stub(Settings()) as stub:
            with tmp.open("w", encoding="utf-8") as out:
                token = ""
                while True:
                    reply = await stub.List(memory_pb2.ListRequest(filter=flt, limit=PAGE, page_token=token))
                    for e in reply.experiences:
                        out.write(json.dumps(json_format.MessageToDict(e, preserving_proto_field_name=True),
                                             ensure_ascii=False) + "\n")
                    written[0] += len(reply.experiences)
                    token = reply.next_page_token
                    if not token:
                        break
        os.replace(tmp, path)

    try:
        _run(main)
    finally:
        tmp.unlink(missing_ok=True)
    console.print(f"wrote {written[0]} units ({_described(flt)}) to {path}")


def read_units(path: Path) -> Iterator[memory_pb2.Experience]:
    """The file's units, each checked as Store checks it; InvalidInput names the line."""
    from google.protobuf import json_format

    from evoskill.core.errors import InvalidInput
    from evoskill.core.memory import check_experience
    from evoskill.memory.v1 import memory_pb2

    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                unit = json_format.ParseDict(json.loads(line), memory_pb2.Experience())
            except (ValueError, json_format.ParseError) as exc:
                raise InvalidInput(f"{path}:{number}: not an Experience as `memory export` writes it: {exc}") from None
            check_experience(unit, f"{path}:{number}")
            yield unit


@memory_app.command("import")
def import_cmd(
    path: Annotated[Path, typer.Argument(metavar="FILE.jsonl", exists=True, dir_okay=False,
                                         help="as `evoskill memory export` writes it")],
) -> None:
    """Store the file's units under their ids: importing a file twice stores nothing twice."""
    from evoskill.cli_support import console, fail
    from evoskill.core.errors import InvalidInput
    from evoskill.memory.v1 import memory_pb2

    try:
        lines = sum(1 for _ in read_units(path))  # every line checked before anything is stored
    except InvalidInput as exc:
        fail(str(exc), 2)
    stored = [0]

    async def main() -> None:
        async with _stub(Settings()) as stub:
            batch: list[memory_pb2.Experience] = []
            for unit in read_units(path):
                batch.append(unit)
                if len(batch) == PAGE:
                    stored[0] += (await stub.Store(memory_pb2.StoreRequest(experiences=batch))).stored
                    batch = []
            if batch:
                stored[0] += (await stub.Store(memory_pb2.StoreRequest(experiences=batch))).stored

    _run(main)
    console.print(f"{path}: {lines} units, {stored[0]} stored under their ids")


def _confirmed(question: str, yes: bool) -> None:
    from evoskill.cli_support import fail

    if yes:
        return
    try:
        if typer.confirm(question, default=False):
            return
    except typer.Abort:  # no answer (end of input) is no
        pass
    fail("not confirmed: nothing deleted (--yes skips the question)")


async def _matched(stub: Any, flt: memory_pb2.MemoryFilter) -> int:
    from evoskill.memory.v1 import memory_pb2

    return int((await stub.List(memory_pb2.ListRequest(filter=flt, limit=1))).matched)


YesOption = Annotated[bool, typer.Option("--yes", "-y", help="do not ask for confirmation")]


@memory_app.command()
def delete(filters: FilterOption = [], yes: YesOption = False) -> None:  # noqa: B006
    """Delete the units under the filter (one is required; `purge` deletes everything), after confirmation."""
    from evoskill.cli_support import console, fail
    from evoskill.memory.v1 import memory_pb2

    flt = parse_filter(filters)
    if not filters:
        fail("delete needs at least one --filter (`evoskill memory purge` deletes every unit)", 2)
    _delete(memory_pb2.DeleteRequest(filter=flt), f"units matching {_described(flt)}", yes, console.print)


@memory_app.command()
def purge(yes: YesOption = False) -> None:
    """Delete every unit of the memory, after confirmation."""
    from evoskill.cli_support import console
    from evoskill.memory.v1 import memory_pb2

    _delete(memory_pb2.DeleteRequest(all=True), "units: the whole memory", yes, console.print)


def _delete(request: memory_pb2.DeleteRequest, what: str, yes: bool, say: Callable[[str], None]) -> None:
    async def main() -> None:
        async with _stub(Settings()) as stub:
            count = await _matched(stub, request.filter)
            if not count:
                say(f"no {what}: nothing to delete")
                return
            # The question is asked with the stub open: in-process, the store stays this command's meanwhile.
            await asyncio.to_thread(_confirmed, f"delete {count} {what}?", yes)
            deleted = (await stub.Delete(request)).deleted
            say(f"deleted {deleted} {what}")

    _run(main)


def _when(unix_ms: int) -> str:
    import datetime

    if not unix_ms:
        return "-"
    return datetime.datetime.fromtimestamp(unix_ms / 1000, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _size(n: int) -> str:
    if not n:
        return "-"
    size = float(n)
    for unit in ("B", "KiB", "MiB"):
        if size < 1024:
            return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


@memory_app.command()
def stats(as_json: Annotated[bool, typer.Option("--json", help="print the figures as one JSON object")] = False
          ) -> None:
    """Both tiers: experiences hot, summaries cold, their oldest and newest, bytes on disk (local mode), the
    experiences and episodes summarised, the last compaction and the retention limits (memory.tiers)."""
    from google.protobuf import json_format

    from evoskill.cli_support import console
    from evoskill.memory.v1 import memory_pb2

    replies: list[memory_pb2.StatsReply] = []

    async def main() -> None:
        async with _stub(Settings()) as stub:
            replies.append(await stub.Stats(memory_pb2.StatsRequest()))

    _run(main)
    (reply,) = replies
    if as_json:
        figures: dict[str, Any] = {field.name: getattr(reply, field.name) for field in reply.DESCRIPTOR.fields}
        for tier in ("hot", "cold"):
            figures[tier] = json_format.MessageToDict(figures[tier], preserving_proto_field_name=True,
                                                      always_print_fields_with_no_presence=True)
            figures[tier].update({k: int(v) for k, v in figures[tier].items() if k != "collection"})
        figures["limits"] = json.loads(reply.limits or "{}")
        print(json.dumps(figures, indent=2, sort_keys=True))
        return
    table = Table("tier", "collection", "points", "oldest", "newest", "on disk", title="memory tiers")
    table.add_row("hot", reply.hot.collection, f"{reply.hot.points} experiences", _when(reply.hot.oldest_unix_ms),
                  _when(reply.hot.newest_unix_ms), _size(reply.hot.bytes))
    table.add_row("cold", reply.cold.collection, f"{reply.cold.points} summaries", _when(reply.cold.oldest_unix_ms),
                  _when(reply.cold.newest_unix_ms), _size(reply.cold.bytes))
    console.print(table)
    console.print(f"summarised: {reply.summarised} experiences of {reply.summarised_episodes} episodes; "
                  f"stored in all: {reply.summarised + reply.hot.points}")
    console.print(f"compactions: {reply.compactions}, the last {_when(reply.last_compaction_unix_ms)}"
                  + (f" ({reply.last_moved} moved)" if reply.compactions else ""))
    limits = json.loads(reply.limits or "{}")
    console.print("limits (memory.tiers): " + ", ".join(f"{k}={v}" for k, v in sorted(limits.items())))


@memory_app.command()
def compact() -> None:
    """Compact now, as the memory service does every memory.tiers.every_s: the episodes the retention limits
    send cold are summarised into the cold collection and dropped from hot."""
    from evoskill.cli_support import console
    from evoskill.memory.v1 import memory_pb2

    async def main() -> None:
        async with _stub(Settings()) as stub:
            reply = await stub.Compact(memory_pb2.CompactRequest())
        why = ", ".join(f"{reason} {n}" for reason, n in sorted(reply.reasons.items())) or "no limit exceeded"
        console.print(f"moved {reply.moved} experiences of {reply.episodes} episodes to cold ({why})")

    _run(main)
