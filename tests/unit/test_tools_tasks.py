"""The tools: scheme's pure parts: the task file and spec, calls as action text, the checkers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evoskill.envs import EnvSpecError, describe_environments, parse_spec
from evoskill.envs.registry import located
from evoskill.envs.tools.calls import (
    MAX_CALLS_PER_TOOL,
    CallError,
    ToolInfo,
    answer_values,
    enumerate_calls,
    read,
    render,
    seen_values,
    template_of,
)
from evoskill.envs.tools.checker import coerce_check, same, state_share, verdict
from evoskill.envs.tools.task import HttpServer, PythonTool, StdioServer, ToolTask, parse_tasks

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "evoskill-tools-example" / "tasks.jsonl"
TIME = ToolInfo("convert_time", "Convert time between timezones", {
    "type": "object", "required": ["source_timezone", "time", "target_timezone"],
    "properties": {"source_timezone": {"type": "string"}, "time": {"type": "string"},
                   "target_timezone": {"type": "string"}}}, "stdio:time")
PRICE = ToolInfo("get_price", "", {"type": "object", "required": ["isbn"],
                                   "properties": {"isbn": {"type": "string"}}}, "stdio:shop")
SEARCH = ToolInfo("search_books", "", {
    "type": "object", "required": ["genre"],
    "properties": {"genre": {"$ref": "#/$defs/Genre"}, "in_stock": {"type": "boolean", "default": True}},
    "$defs": {"Genre": {"enum": ["mystery", "romance"], "type": "string"}}}, "stdio:shop")
TOOLS = {t.name: t for t in (TIME, PRICE, SEARCH)}


def task(**fields: Any) -> ToolTask:
    return ToolTask.model_validate({"goal": "g", "expected_answer": 1, **fields})


# -- the task file ---------------------------------------------------------------------------------------------


def test_the_example_task_file_parses_with_every_kind_of_tool_and_checker() -> None:
    tasks = parse_tasks(EXAMPLE, EXAMPLE.read_text()).tasks
    assert [t.id for t in tasks] == ["cheapest-scifi", "favourite-author", "mystery-cart", "tokyo-to-kolkata"]
    kinds = {type(s) for t in tasks for s in t.tools}
    assert kinds == {StdioServer, PythonTool}
    assert tasks[0].has_expected_answer and tasks[2].expected_state == {"cart": ["978-0062693662"]}
    assert tasks[3].check == "checks:time_in_kolkata" and not tasks[3].has_expected_answer
    assert tasks[3].tools[0].argv[1:] == ["-m", "mcp_server_time", "--local-timezone", "UTC"]  # type: ignore[union-attr]


def test_a_tool_source_is_told_by_its_key_and_a_string_is_a_function_or_a_url() -> None:
    t = task(tools=["pkg.mod:f", "https://h/mcp", {"command": "srv", "args": ["a b"]}, {"python": "m:g", "name": "h"}])
    assert t.tools == [PythonTool(python="pkg.mod:f"), HttpServer(url="https://h/mcp"),
                       StdioServer(command="srv", args=["a b"]), PythonTool(python="m:g", name="h")]
    assert t.tools[2].argv == ["srv", "a b"]  # type: ignore[union-attr]


@pytest.mark.parametrize(("line", "message"), [
    ('{"goal": "g", "tools": []}', "line 1: task: Value error, no checker"),
    ('{"goal": "g", "expected_answer": 1, "tools": [{"command": "x", "colour": 1}]}', "tools.0.command.colour"),
    ('{"goal": "g", "expected_answer": 1, "tools": [{"url": "ftp://x"}]}', "tools.0.url.url: String should match"),
    ('{"expected_answer": 1}', "line 1: goal: Field required"),
    ('{"goal": "g", "expected_answer": 1, "fold": "val"}', "fold: Input should be 'train', 'dev' or 'test'"),
    ('{"goal": "g", "expected_answer": 1, "arguments": {"a.b.c": [1]}}', "neither 'parameter' nor 'tool.parameter'"),
    ('[1]', "line 1: a task is a JSON object, not list"),
    ('{"goal": ', "line 1: not JSON"),
    ('{"id": "a", "goal": "g", "check": "m:f"}\n{"id": "a", "goal": "h", "check": "m:f"}',
     "line 2: task id 'a' is also on line 1"),
    ('', "has no task"),
])
def test_a_bad_task_file_is_one_line_naming_the_line_and_field(line: str, message: str) -> None:
    with pytest.raises(EnvSpecError) as info:
        parse_tasks(Path("tasks.jsonl"), line)
    assert message in str(info.value) and "\n" not in str(info.value), str(info.value)


def test_folds_pick_the_tasks_naming_them_or_every_task(tmp_path: Path) -> None:
    lines = [{"id": "a", "goal": "g", "check": "m:f", "fold": "train"}, {"id": "b", "goal": "g", "check": "m:f"}]
    tasks = parse_tasks(tmp_path / "t.jsonl", "\n".join(json.dumps(x) for x in lines))
    assert [t.id for t in tasks.pool("train")] == ["a"]
    with pytest.raises(EnvSpecError, match="no task in fold 'test' \\(its tasks name train\\)"):
        tasks.pool("test")
    unfolded = parse_tasks(tmp_path / "t.jsonl", json.dumps(lines[1]))
    assert [t.id for t in unfolded.pool("test")] == ["b"]


# -- the spec --------------------------------------------------------------------------------------------------


def test_the_spec_names_a_file_by_path_and_canonically_by_its_absolute_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(EXAMPLE.parents[2])
    spec = parse_spec("tools:examples/evoskill-tools-example/tasks.jsonl?task=mystery-cart,timeout=2")
    assert spec.name == str(EXAMPLE) and spec.params == {"task": "mystery-cart", "timeout": "2"}
    assert parse_spec(spec.canonical()) == spec
    assert located("tools:examples/evoskill-tools-example/tasks.jsonl") == f"tools:{EXAMPLE}"
    assert located("twx:coincollector") == "twx:coincollector"  # other schemes travel as typed
    servers = parse_spec(f"tools:{EXAMPLE}?servers=python -m mcp_server_time|http://127.0.0.1:9/mcp")
    assert servers.params["servers"] == "python -m mcp_server_time|http://127.0.0.1:9/mcp"
    assert "tools:PATH.jsonl" in describe_environments()


@pytest.mark.parametrize(("spec", "message"), [
    ("tools:/nowhere/tasks.jsonl", "task file '/nowhere/tasks.jsonl': No such file or directory"),
    (f"tools:{EXAMPLE}?task=nope", "tasks.jsonl has no task 'nope'; its tasks: cheapest-scifi, favourite-author"),
    (f"tools:{EXAMPLE}?timeout=-1", "timeout='-1' must be a positive number of seconds"),
    (f"tools:{EXAMPLE}?timeout=inf", "timeout='inf' must be a positive number of seconds"),
    (f"tools:{EXAMPLE}?colour=red", "unknown parameter 'colour' for tools:; accepted parameters: servers, task"),
])
def test_a_bad_tools_spec_is_one_line_naming_it(spec: str, message: str) -> None:
    with pytest.raises(EnvSpecError) as info:
        parse_spec(spec)
    assert message in str(info.value) and "\n" not in str(info.value), str(info.value)


# -- calls -----------------------------------------------------------------------------------------------------


def test_a_call_renders_in_schema_order_and_reads_back_from_any_spelling() -> None:
    text = render("convert_time", {"target_timezone": "Asia/Kolkata", "time": "09:30", "source_timezone": "UTC"},
                  TIME.params)
    assert text == "convert_time(source_timezone='UTC', time='09:30', target_timezone='Asia/Kolkata')"
    for spelling in (text, 'convert_time("UTC", "09:30", target_timezone="Asia/Kolkata")',
                     "convert_time(target_timezone='Asia/Kolkata', time='09:30', source_timezone='UTC')"):
        call = read(spelling, TOOLS)
        assert render(call.name, call.arguments, TIME.params) == text
    assert read("final_answer(answer={'a': [1, true, null]})", TOOLS).arguments == {"answer": {"a": [1, True, None]}}
    assert read("final_answer(-2.5)", TOOLS).arguments == {"answer": -2.5}
    assert read("final_answer()", TOOLS).arguments == {}
    dashed = ToolInfo("get-weather.v2", "", {"type": "object", "properties": {"city": {"type": "string"}}}, "x")
    assert read("get-weather.v2(city='Oslo')", {dashed.name: dashed}).arguments == {"city": "Oslo"}  # MCP names
    assert template_of("convert_time", TOOLS) == "convert_time(source_timezone, time, target_timezone)"
    assert template_of("final_answer", TOOLS) == "final_answer(answer)"
    assert TIME.signature() == "convert_time(source_timezone: string, time: string, target_timezone: string)"
    assert SEARCH.signature() == "search_books(genre: 'mystery' | 'romance', in_stock?: boolean)"


@pytest.mark.parametrize(("text", "message"), [
    ("go north", "not a call"),
    ("get_price", "not a call"),
    ("os.system('ls')", "no tool 'os.system'"),
    ("get_price(isbn='1')(x=2)", "not a call"),
    ("get_price(isbn='1'), get_price(isbn='2')", "not a call"),
    ("get_price(isbn=open('x'))", "is not a literal"),
    ("get_price(**kw)", "no * or ** arguments"),
    ("get_price(isbn='1', isbn='2')", "given twice"),
    ("get_price('1', isbn='2')", "argument 'isbn' of get_price given twice"),
    ("steal(x=1)", "no tool 'steal'; tools: convert_time, get_price, search_books"),
    ("get_price(isbn=5)", "invalid arguments for get_price(isbn: string): isbn: 5 is not of type 'string'"),
    ("get_price()", "'isbn' is a required property"),
    ("search_books(genre='poetry')", "genre: 'poetry' is not one of ['mystery', 'romance']"),
    ("combine_results(1)", "combine_results takes no arguments"),
    ("final_answer(1, 2)", "takes 1 argument(s)"),
])
def test_a_bad_call_is_refused_naming_why(text: str, message: str) -> None:
    with pytest.raises(CallError, match=None) as info:
        read(text, TOOLS)
    assert message in str(info.value), str(info.value)


def test_calls_are_enumerated_from_enums_hints_and_what_results_gave() -> None:
    assert enumerate_calls(SEARCH, {}, {}) == [{"genre": "mystery"}, {"genre": "romance"}]
    assert enumerate_calls(PRICE, {}, {}) == []  # a required string nothing names: no call offered
    results = [{"result": [{"isbn": "1", "title": "A"}, {"isbn": "2", "title": "B", "price": 3.5}]}]
    seen = seen_values(results)
    assert enumerate_calls(PRICE, {}, seen) == [{"isbn": "1"}, {"isbn": "2"}]
    assert enumerate_calls(PRICE, {"get_price.isbn": ["9"], "isbn": ["8"]}, {}) == [{"isbn": "9"}]
    assert enumerate_calls(PRICE, {"isbn": [7]}, {}) == []  # the schema drops a number for a string
    # An optional parameter is left out, or takes its hinted values.
    assert enumerate_calls(SEARCH, {"in_stock": [False], "search_books.genre": ["mystery"]}, {}) == [
        {"genre": "mystery"}, {"genre": "mystery", "in_stock": False},
        {"genre": "romance"}, {"genre": "romance", "in_stock": False}]  # hints add to the enum's values
    hints = {"source_timezone": [f"z{i}" for i in range(10)], "time": ["09:30"], "target_timezone": list("abcd")}
    assert len(enumerate_calls(TIME, hints, {})) == MAX_CALLS_PER_TOOL
    assert answer_values(["x"], [*results, 42]) == ["x", "1", "A", "2", "B", 3.5, 42]


# -- checkers --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("given", "expected", "equal"), [
    ("  Foundation ", "foundation", True), ("Found ation", "Foundation", False), ("8.990", 8.99, True),
    (1, True, False), ([1, "A"], [1.0, "a"], True), ({"a": 1}, {"a": 1, "b": 2}, False), (None, None, True),
])
def test_answers_match_after_normalising(given: Any, expected: Any, equal: bool) -> None:
    assert same(given, expected) is equal


def test_a_verdict_combines_the_checkers_into_won_and_a_score() -> None:
    def no_check(*_: Any) -> float:
        raise AssertionError("no check to run")

    t = task(expected_answer="Foundation", expected_state={"cart": ["1"], "paid": True})
    v = verdict(t, "foundation", True, {"cart": ["1"], "paid": False}, [], no_check)
    assert (v.won, v.score) == (False, pytest.approx(0.75)) and v.notes == ("the state differs at paid",)
    assert state_share({"cart": ["1"], "paid": True, "extra": 0}, t.expected_state or {}) == (1.0, [])
    assert not verdict(t, None, False, {}, [], no_check).won

    checked = task(expected_answer=None, check="m:f")
    assert verdict(checked, None, True, None, [], lambda *a: 1.0).won  # expected_answer null is a checker too
    assert coerce_check(True) == 1.0 and coerce_check(0.25) == 0.25
    with pytest.raises(ValueError, match="returned 'yes'"):
        coerce_check("yes")

    def crashed(*_: Any) -> float:
        raise RuntimeError("timed out")

    only_check = ToolTask(goal="g", check="m:f")
    failed = verdict(only_check, 1, True, None, [], crashed)
    assert not failed.won and failed.external and failed.notes == ("check m:f failed: timed out",)
