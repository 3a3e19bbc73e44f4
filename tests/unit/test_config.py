"""Configuration: env overrides, config files, and the one listing of every setting."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from evoskill.core.errors import InvalidInput
from evoskill.platform.config import ConfigFileError, Settings, describe, explain


def test_environment_overrides_nested_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVOSKILL_NATS__URL", "nats://nats.example:4222")
    monkeypatch.setenv("EVOSKILL_SEARCH__C_PUCT", "2.0")
    monkeypatch.setenv("EVOSKILL_PLANNER_ENDPOINT__PORT", "6000")
    s = Settings()
    assert s.nats_url == "nats://nats.example:4222"
    assert s.search.c_puct == 2.0
    assert s.endpoint("planner").target == "127.0.0.1:6000"


def test_config_file_is_read_and_env_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "evoskill.yaml"
    path.write_text("temporal:\n  address: temporal.example:7233\nsearch:\n  num_simulations: 500\n")
    monkeypatch.setenv("EVOSKILL_CONFIG_FILE", str(path))
    monkeypatch.setenv("EVOSKILL_SEARCH__NUM_SIMULATIONS", "100")
    s = Settings()
    assert s.temporal_address == "temporal.example:7233"
    assert s.search.num_simulations == 100


def test_missing_config_file_names_the_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVOSKILL_CONFIG_FILE", "/nonexistent/evoskill.yaml")
    with pytest.raises(ConfigFileError, match=r"nonexistent/evoskill\.yaml"):
        Settings()


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("EVOSKILL_SEARCH__C_PCUT", "1", "search.c_pcut (EVOSKILL_SEARCH__C_PCUT) is not a setting; did you mean "
         "search.c_puct (EVOSKILL_SEARCH__C_PUCT)?"),
        ("EVOSKILL_SEARCH__C_PUCT", "nan", "setting search.c_puct (EVOSKILL_SEARCH__C_PUCT): Input should be a finite"),
        ("EVOSKILL_SEARCH__C_PUCT", "abc", "setting search.c_puct (EVOSKILL_SEARCH__C_PUCT): Input should be a valid"),
    ],
)
def test_a_bad_setting_is_one_line_naming_it(
    variable: str, value: str, says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValidationError) as caught:
        Settings()
    (line,) = explain(caught.value)
    assert line.startswith(says)


def test_cli_prints_a_bad_setting_in_one_line_and_exits_2() -> None:
    env = {**os.environ, "EVOSKILL_SEARCH__C_PUCT": "abc"}
    proc = subprocess.run([sys.executable, "-m", "evoskill", "config"], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: setting search.c_puct (EVOSKILL_SEARCH__C_PUCT): Input should be a valid number, unable to parse "
        "string as a number (got 'abc')"
    ]


def test_every_setting_is_listed_with_a_meaning() -> None:
    rows = describe()
    names = {r.name for r in rows}
    expected = {"nats.url", "temporal.address", "qdrant.url", "search.c_puct", "learner.lr", "planner_endpoint.port"}
    assert expected <= names
    assert all(r.meaning for r in rows), [r.name for r in rows if not r.meaning]


def test_config_lists_the_values_in_effect_with_their_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVOSKILL_SEARCH__C_PUCT", "2.5")
    rows = {r.name: r for r in describe(Settings())}
    assert rows["search.c_puct"].value == 2.5 and rows["search.c_puct"].default != 2.5
    assert rows["search.c_puct"].variable == "EVOSKILL_SEARCH__C_PUCT"
    proc = subprocess.run([sys.executable, "-m", "evoskill", "config", "--json"], capture_output=True, text=True,
                          env={**os.environ, "EVOSKILL_SEARCH__C_PUCT": "2.5"}, timeout=120, check=True)
    listed = {r["name"]: r for r in json.loads(proc.stdout)}
    assert listed["search.c_puct"]["value"] == 2.5 and listed["state_dir"]["value"] == ".evoskill"


def test_unknown_service_is_a_clear_error() -> None:
    with pytest.raises(InvalidInput, match="unknown service 'plannr'"):
        Settings().endpoint("plannr")


def test_memory_profiles_extend_the_builtin_and_the_default_must_be_one(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "evoskill.yaml"
    path.write_text("memory:\n  profile: calm\n  profiles:\n    calm: {reward: 1.0}\n    stable: {outcome: 2.0}\n")
    monkeypatch.setenv("EVOSKILL_CONFIG_FILE", str(path))
    memory = Settings().memory
    assert sorted(memory.profiles) == ["calm", "exploratory", "stable"]
    assert (memory.profiles["calm"].reward, memory.profiles["stable"].outcome) == (1.0, 2.0)
    path.write_text("memory:\n  profile: bold\n")
    with pytest.raises(ValidationError, match="profile 'bold' is not one of profiles"):
        Settings()
    path.write_text("memory:\n  profiles:\n    wild: {diversity: 2.0}\n")
    with pytest.raises(ValidationError, match="diversity"):
        Settings()


@pytest.mark.parametrize(
    ("file", "variable", "says"),
    [
        ("", "EVOSKILL_SERCH__C_PUCT=1", "EVOSKILL_SERCH__C_PUCT is not a setting; did you mean search "
         "(EVOSKILL_SEARCH__…)?"),
        ("serch:\n  c_puct: 1\n", "", "'serch' is not a setting; did you mean search (EVOSKILL_SEARCH__…)?"),
        ("search:\n  c_pcut: 1\n", "", "search.c_pcut (in EVOSKILL_CONFIG_FILE={file}) is not a setting; did you "
         "mean search.c_puct (EVOSKILL_SEARCH__C_PUCT)?"),
        ("search:\n  c_puct: abc\n", "", "setting search.c_puct (in EVOSKILL_CONFIG_FILE={file}): Input should be a "
         "valid number, unable to parse string as a number (got 'abc')"),
        ("search:\n  c_puct: 1\n", "EVOSKILL_SEARCH__C_PUCT=abc", "setting search.c_puct (EVOSKILL_SEARCH__C_PUCT): "
         "Input should be a valid number, unable to parse string as a number (got 'abc')"),
        ("", "EVOSKILL_LEARNER__HIDEN=8", "did you mean learner.hidden (EVOSKILL_LEARNER__HIDDEN)?"),
    ],
)
def test_cli_refuses_a_misspelt_key_in_a_file_or_the_environment_with_a_suggestion(
        file: str, variable: str, says: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVOSKILL_")}
    if file:
        (tmp_path / "evoskill.yaml").write_text(file)
        env["EVOSKILL_CONFIG_FILE"] = str(tmp_path / "evoskill.yaml")
    if variable:
        name, value = variable.split("=")
        env[name] = value
    proc = subprocess.run([sys.executable, "-m", "evoskill", "config"], env=env, capture_output=True, text=True,
                          timeout=120, check=False, cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("error: ") and line.endswith(says.format(file=tmp_path / "evoskill.yaml"))


def test_variables_that_are_no_settings_group_are_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    # nats-server's password variables and a key named by llm.api_key_env share the prefix, without `__`
    monkeypatch.setenv("EVOSKILL_NATS_PASSWORD_PLANNER", "x")
    monkeypatch.setenv("EVOSKILL_TEST_LLM_KEY", "y")
    assert Settings().search.num_simulations > 0


def test_config_says_where_each_value_came_from_as_yaml_json_or_a_table(tmp_path: Path) -> None:
    (tmp_path / "evoskill.yaml").write_text("search:\n  c_puct: 3.0\n  gamma: 0.9\n")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("EVOSKILL_")}, "COLUMNS": "250",
           "EVOSKILL_CONFIG_FILE": str(tmp_path / "evoskill.yaml"), "EVOSKILL_SEARCH__GAMMA": "0.8"}

    def config(*args: str) -> str:
        proc = subprocess.run([sys.executable, "-m", "evoskill", "config", *args], env=env, capture_output=True,
                              text=True, timeout=120, check=True)
        return proc.stdout

    for listed in (json.loads(config("--format", "json")), yaml.safe_load(config("--format", "yaml"))):
        rows = {r["name"]: r for r in listed}
        assert (rows["search.c_puct"]["value"], rows["search.c_puct"]["source"]) == (3.0, "file")
        assert (rows["search.gamma"]["value"], rows["search.gamma"]["source"]) == (0.8, "environment")
        assert rows["learner.lr"]["source"] == "default"
        assert rows["search.gamma"]["variable"] == "EVOSKILL_SEARCH__GAMMA"
    table = config().splitlines()
    line = next(ln for ln in table if "search.c_puct" in ln)
    assert "3.0" in line and "file" in line and "EVOSKILL_SEARCH__C_PUCT" in line
    cells = [c.strip() for c in next(ln for ln in table if " nats.auth " in ln).split("│")]
    assert cells[2:5] == ["true", "default", "true"]  # as a settings file writes it, not Python's True
    cells = [c.strip() for c in next(ln for ln in table if " envs.cache_dir " in ln).split("│")]
    assert cells[2:5] == ["null", "default", "null"]
    bad = subprocess.run([sys.executable, "-m", "evoskill", "config", "--format", "xml"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "xml" in bad.stderr
