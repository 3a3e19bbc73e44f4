"""The `run` object of every JSON report: versions, git revision, the settings in effect with secrets masked."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from pydantic import SecretStr

from evoskill.platform import provenance
from evoskill.platform.config import Settings
from evoskill.platform.provenance import run_record, write_report
from evoskill.platform.telemetry import package_version


def test_a_report_records_versions_revision_and_the_settings_it_ran_with(tmp_path: Path) -> None:
    settings = Settings(state_dir=tmp_path)
    settings = settings.model_copy(update={
        "search": settings.search.model_copy(update={"num_simulations": 7}),
        "nats": settings.nats.model_copy(update={"password": SecretStr("hunter2")}),
    })
    write_report(tmp_path / "new" / "report.json", {"success_rate": 0.5}, settings)
    report = json.loads((tmp_path / "new" / "report.json").read_text())
    assert report["success_rate"] == 0.5
    run = report["run"]
    assert run["evoskill"] == package_version() and run["libraries"]["numpy"]
    assert run["settings"]["search"]["num_simulations"] == 7 and run["settings"]["state_dir"] == str(tmp_path)
    assert "hunter2" not in json.dumps(report)
    assert set(run) == {"evoskill", "git_revision", "python", "libraries", "command", "host", "cpu", "at",
                        "settings"}
    assert run["cpu"]["model"] and run["cpu"]["vector_isa"] and run["cpu"]["logical_cores"] >= 1


def test_the_git_revision_is_this_checkouts_and_empty_outside_one(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    head = subprocess.run(["git", "-C", str(provenance.SOURCE), "rev-parse", "HEAD"], capture_output=True, text=True)
    provenance.git_revision.cache_clear()
    if head.returncode == 0:  # a checkout (not an unpacked archive)
        assert re.fullmatch(re.escape(head.stdout.strip()) + r"(\+dirty)?", provenance.git_revision())
    monkeypatch.setattr(provenance, "SOURCE", tmp_path)
    provenance.git_revision.cache_clear()
    try:
        assert provenance.git_revision() == ""
        assert run_record(Settings(state_dir=tmp_path))["git_revision"] == ""
    finally:
        monkeypatch.undo()
        provenance.git_revision.cache_clear()


def test_paths_under_the_working_folder_are_written_relative_to_it(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    write_report(tmp_path / "r.json", {"library": str(tmp_path / "runs" / "library.jsonl"), "other": "/elsewhere/x"},
                 Settings(state_dir=tmp_path / ".evoskill"))
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["library"] == "runs/library.jsonl" and report["other"] == "/elsewhere/x"
    assert report["run"]["settings"]["state_dir"] == ".evoskill" and str(tmp_path) not in json.dumps(report)
