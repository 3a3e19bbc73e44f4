"""`evoskill memory …` through the CLI against a real memory service (real gRPC, Qdrant local mode in the
test's folder), and with no service running, against the store the command serves in its own process."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest

from evoskill.memory.v1 import memory_pb2
from evoskill.platform.config import Settings
from tests.integration.test_memory_service import memory, memory_settings, stored_count  # noqa: F401 (fixtures)
from tests.integration.test_runs_cli import Cli
from tests.integration.waiting import rpc_error

pytestmark = pytest.mark.integration

Experience = memory_pb2.Experience
GOAL = "find the golden coin"


def units() -> list[memory_pb2.Experience]:
    return [
        Experience(goal=GOAL, state="the kitchen with a fridge", action="move east", env_spec="twx:coin",
                   episode_id="e1", step_index=0, reward=1.0, outcome=memory_pb2.OUTCOME_WON, metadata={"k": "v"}),
        Experience(goal=GOAL, state="the kitchen with a fridge open", action="move north",
                   env_spec="twx:coin?numLocations=5", episode_id="e2", step_index=3, outcome=memory_pb2.OUTCOME_LOST),
        Experience(goal="cook a meal", state="a red apple on the counter", action="take apple",
                   env_spec="twx:cooking", episode_id="e3", step_index=0, reward=0.5),
    ]


def ids_in(out: str) -> set[str]:
    return {i for i in ("e1/0", "e2/3", "e3/0") if i in out}


async def test_list_search_show_export_import_delete_purge_on_the_running_service(memory, tmp_path: Path,  # noqa: F811
                                                                                  memory_settings: Settings) -> None:  # noqa: F811
    running, stub = memory
    await stub.Store(memory_pb2.StoreRequest(experiences=units()))
    cli = Cli(memory_settings, tmp_path)

    code, out, err = await cli("memory", "list")
    assert code == 0 and "3 of 3 units" in out and ids_in(out) == {"e1/0", "e2/3", "e3/0"}, err
    code, out, _ = await cli("memory", "list", "--filter", "family=twx:coin", "--filter", "outcome=won")
    assert code == 0 and ids_in(out) == {"e1/0"} and "1 of 1 units" in out
    code, out, _ = await cli("memory", "list", "--filter", "episode=e3", "--limit", "1")
    assert code == 0 and ids_in(out) == {"e3/0"}

    # Both stages: the recall's similarity and the formula's score, as Retrieve answers them.
    expected = (await stub.Retrieve(memory_pb2.RetrieveRequest(goal=GOAL, state="the kitchen", limit=3,
                                                               profile="stable"))).results
    code, out, _ = await cli("memory", "search", GOAL, "--state", "the kitchen", "--limit", "3", "--profile",
                             "stable")
    assert code == 0 and "similarity (recall)" in out and "score (formula)" in out
    for r in expected:
        line = next(ln for ln in out.splitlines() if r.experience.id in ln)
        assert f"{r.similarity:.4f}" in line and f"{r.score:.4f}" in line
    code, out, _ = await cli("memory", "search", GOAL, "--filter", "env=twx:cooking")
    assert code == 0 and ids_in(out) == {"e3/0"}

    code, out, _ = await cli("memory", "show", "e1/0")
    assert code == 0 and "move east" in out and "won" in out and "k=v" in out

    exported = tmp_path / "out" / "memory.jsonl"
    code, out, _ = await cli("memory", "export", str(exported))
    assert code == 0 and "wrote 3 units" in out
    rows = [json.loads(line) for line in exported.read_text().splitlines()]
    assert sorted(r["id"] for r in rows) == ["e1/0", "e2/3", "e3/0"]

    # Destructive commands ask; no answer (or no) deletes nothing.
    code, _, err = await cli("memory", "purge")
    assert code == 1 and "nothing deleted" in err and stored_count(running) == 3
    code, out, _ = await cli("memory", "delete", "--filter", "family=twx:coin", "--yes")
    assert code == 0 and "deleted 2 units" in out and stored_count(running) == 1
    code, out, _ = await cli("memory", "purge", "--yes")
    assert code == 0 and "deleted 1 units" in out and stored_count(running) == 0

    # Import restores every unit under its id, and a second import adds nothing.
    for _ in range(2):
        code, out, _ = await cli("memory", "import", str(exported))
        assert code == 0 and "3 units" in out and stored_count(running) == 3
    restored = (await stub.Get(memory_pb2.GetRequest(ids=["e1/0", "e2/3", "e3/0"]))).experiences
    assert [e.id for e in restored] == ["e1/0", "e2/3", "e3/0"]
    first = units()[0]
    first.id, first.env_family = "e1/0", "twx:coin"
    first.time_unix_ms = int(next(r for r in rows if r["id"] == "e1/0")["time_unix_ms"])  # kept, not re-stamped
    assert restored[0] == first


@pytest.mark.parametrize(("args", "code", "named"), [
    (("list", "--filter", "colour=red"), 2, "--filter 'colour=red'"),
    (("list", "--filter", "outcome=maybe"), 2, "outcome 'maybe'"),
    (("search", "coin", "--profile", "bold"), 2, "unknown memory profile 'bold'"),
    (("search", "coin", "--filter", "episode=e1"), 2, "search filters by"),
    (("delete", "--yes"), 2, "delete needs at least one --filter"),
    (("show", "nowhere/0"), 1, "no unit with id 'nowhere/0'"),
])
async def test_bad_input_is_one_line_and_a_non_zero_exit(memory, tmp_path: Path, memory_settings: Settings,  # noqa: F811
                                                         args: tuple[str, ...], code: int, named: str) -> None:
    got, _, err = await Cli(memory_settings, tmp_path)("memory", *args)
    assert got == code and named in err and len(err.strip().splitlines()) == 1


async def test_a_bad_import_line_is_named_and_nothing_is_stored(memory, tmp_path: Path,  # noqa: F811
                                                                memory_settings: Settings) -> None:  # noqa: F811
    running, _ = memory
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"goal": "g", "action": "a", "id": "ok/0"}) + "\n" + json.dumps({"action": "a"}) + "\n")
    code, _, err = await Cli(memory_settings, tmp_path)("memory", "import", str(path))
    assert code == 2 and "bad.jsonl:2" in err and "goal and state are both empty" in err
    assert stored_count(running) == 0


async def test_delete_refuses_an_empty_filter_and_list_a_foreign_page_token(memory) -> None:  # noqa: F811
    _, stub = memory
    err = await rpc_error(stub.Delete(memory_pb2.DeleteRequest()))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and "filter is empty" in (err.details() or "")
    err = await rpc_error(stub.Delete(memory_pb2.DeleteRequest(all=True, filter=memory_pb2.MemoryFilter(
        episode_id="e1"))))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    err = await rpc_error(stub.List(memory_pb2.ListRequest(page_token="page 2")))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT and "page_token" in (err.details() or "")


async def test_pages_cover_every_unit_once(memory) -> None:  # noqa: F811
    _, stub = memory
    many = [Experience(goal=GOAL, state=f"room {i}", action="look", episode_id="p", step_index=i) for i in range(7)]
    await stub.Store(memory_pb2.StoreRequest(experiences=many))
    seen, token = [], ""
    while True:
        reply = await stub.List(memory_pb2.ListRequest(limit=3, page_token=token))
        assert reply.matched == 7
        seen += [e.id for e in reply.experiences]
        if not (token := reply.next_page_token):
            break
    assert sorted(seen) == sorted(f"p/{i}" for i in range(7))


async def test_without_a_memory_service_the_command_opens_the_store_itself(tmp_path: Path,
                                                                          memory_settings: Settings) -> None:  # noqa: F811
    cli = Cli(memory_settings, tmp_path)
    path = tmp_path / "units.jsonl"
    path.write_text("".join(json.dumps({"goal": GOAL, "state": "hall", "action": "look", "id": f"x/{i}"}) + "\n"
                            for i in range(2)))
    code, out, err = await cli("memory", "import", str(path))
    assert code == 0 and "2 stored" in out and "opening the store" in err
    code, out, _ = await cli("memory", "list")
    assert code == 0 and "2 of 2 units" in out


async def test_stats_shows_both_tiers_and_compact_moves_what_the_limits_send_cold(tmp_path: Path,
                                                                                  memory_settings: Settings) -> None:  # noqa: F811
    """Without a service (the store opened in-process): stats before and after `memory compact`, as a table and
    as JSON; a search then fills from cold, flagged."""
    tiers = memory_settings.memory.tiers.model_copy(update={"hot_max": 1, "min_age_s": 0.0, "max_age_days": 0.0})
    settings = memory_settings.model_copy(update={"memory": memory_settings.memory.model_copy(
        update={"tiers": tiers})})
    cli = Cli(settings, tmp_path)
    path = tmp_path / "units.jsonl"
    path.write_text("".join(json.dumps({"goal": GOAL, "state": f"hall {i}", "action": "look", "episodeId": f"e{i}",
                                        "outcome": "OUTCOME_WON", "timeUnixMs": str(1_700_000_000_000 + i)}) + "\n"
                            for i in range(3)))
    assert (await cli("memory", "import", str(path)))[0] == 0
    code, out, _ = await cli("memory", "stats", "--json")
    figures = json.loads(out)
    assert code == 0 and figures["hot"]["points"] == 3 and figures["cold"]["points"] == 0
    assert figures["hot"]["oldest_unix_ms"] == 1_700_000_000_000 and figures["compactions"] == 0
    assert figures["limits"]["hot_max"] == 1 and figures["cold"]["collection"] == "experiences_cold"

    code, out, _ = await cli("memory", "compact")
    assert code == 0 and "moved 2 experiences of 2 episodes to cold (count 2)" in out
    code, out, _ = await cli("memory", "stats")
    assert code == 0 and "1 experiences" in out and "1 summaries" in out and "2023-11-14" in out
    assert "summarised: 2 experiences of 2 episodes; stored in all: 3" in out and "compactions: 1" in out
    figures = json.loads((await cli("memory", "stats", "--json"))[1])
    assert (figures["summarised"], figures["summarised_episodes"], figures["last_moved"]) == (2, 2, 2)
    assert figures["hot"]["bytes"] > 0 and figures["last_compaction_unix_ms"] > 0

    code, out, _ = await cli("memory", "search", GOAL, "--state", "hall", "--limit", "3")
    assert code == 0 and "cold ×2" in out and "hot" in out
