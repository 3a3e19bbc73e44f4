"""The policy registry: exported θ versions in one folder, with a small JSON index.

`<folder>/policy-v000003.onnx` is the file `core.learn.export` writes; `<folder>/index.json` lists the
published versions with their creation time, training metrics, the Train request id that made each
(what makes a retried Train answer with the version it already made) and what made it (`run`: the request's
budget and seed, the environments in replay, versions, git revision and settings), and which version serves: the one
promoted by `set_serving` (shadow, canary, promotion and rollback decide it; see docs/exploration.md),
which planners serve for an empty policy_version; until one is promoted they serve the latest. A version
is published when it is in the index (the file is written first, then the index, both atomically), so a
crash between the two leaves an unlisted file that the next export overwrites. Readers (the learner's
GetPolicy, a planner sharing the state folder) never see a half-written file. Imports no torch: the
planner reads it too.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from evoskill.core.errors import InvalidInput, NotFound

INDEX = "index.json"
_VERSION = re.compile(r"^v?(\d+)$")


def feature_cache_dir(state_dir: Path) -> Path:
    """Where the learner and a planner on the same state folder keep the featuriser's model file."""
    return state_dir / "cache" / "features"


def version_name(number: int) -> str:
    """The version string of a policy number: 3 -> "v000003" (the number in its file name)."""
    return f"v{number:06d}"


def parse_version(version: str) -> int:
    """ "v000003" or "3" -> 3; anything else is an InvalidInput naming the accepted forms."""
    m = _VERSION.match(version.strip())
    if m is None or int(m.group(1)) < 1:
        raise InvalidInput(f"policy version {version!r} is not of the form 'v000003' or '3'")
    return int(m.group(1))


@dataclass(frozen=True)
class PolicyEntry:
    version: str
    file: str  # name inside the registry folder
    created_unix_ms: int
    metrics: dict[str, float] = field(default_factory=dict)
    request_id: str = ""  # the Train request that made it ("" = none given)
    run: dict[str, Any] = field(default_factory=dict)  # what made it: the Train request, data, versions, settings

    @property
    def number(self) -> int:
        return parse_version(self.version)


@dataclass(frozen=True)
class ServingRecord:
    """The promoted version, why, and when it was set."""

    version: str
    reason: str
    changed_unix_ms: int


class PolicyRegistry:
    """Published versions in `directory`, oldest first; `add` keeps the index on disk up to date."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        self._lock = threading.Lock()

    def _read_index(self) -> tuple[list[PolicyEntry], ServingRecord | None]:
        path = self.directory / INDEX
        if not path.exists():
            return [], None
        index = json.loads(path.read_text())
        entries = [PolicyEntry(r["version"], r["file"], int(r["created_unix_ms"]), dict(r["metrics"]),
                               r.get("request_id", ""), r.get("run", {})) for r in index["policies"]]
        s = index.get("serving")  # absent in indexes written before promotion existed
        return entries, ServingRecord(s["version"], s["reason"], int(s["changed_unix_ms"])) if s else None

    def _read(self) -> list[PolicyEntry]:
        return self._read_index()[0]

    def _write(self, entries: list[PolicyEntry], serving: ServingRecord | None) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.directory, suffix=".json.tmp")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump({"policies": [asdict(e) for e in entries],
                           "serving": asdict(serving) if serving else None}, f, indent=1)
            os.replace(tmp, self.directory / INDEX)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def list(self) -> list[PolicyEntry]:
        with self._lock:
            return self._read()

    def latest(self) -> PolicyEntry | None:
        entries = self.list()
        return max(entries, key=lambda e: e.number) if entries else None

    def get(self, version: str = "") -> PolicyEntry:
        """The entry of `version` ("" = latest); NotFound if it was never published."""
        if not version:
            latest = self.latest()
            if latest is None:
                raise NotFound(f"no policy has been published yet in {self.directory}")
            return latest
        number = parse_version(version)
        for entry in self.list():
            if entry.number == number:
                return entry
        raise NotFound(f"policy version {version!r} is not published in {self.directory}")

    def made_by(self, request_id: str) -> PolicyEntry | None:
        """The version a Train request with this id published, if any."""
        return next((e for e in self.list() if request_id and e.request_id == request_id), None)

    def path(self, entry: PolicyEntry) -> Path:
        return self.directory / entry.file

    def add(self, number: int, file: Path, metrics: dict[str, float], request_id: str = "",
            run: dict[str, Any] | None = None) -> PolicyEntry:
        """Publish the exported `file` as version `number` (which must exceed every listed one)."""
        entry = PolicyEntry(version_name(number), file.name, int(time.time() * 1000), dict(metrics), request_id,
                            run or {})
        with self._lock:
            entries, serving = self._read_index()
            if entries and number <= max(e.number for e in entries):
                raise ValueError(f"version {number} is not newer than the published ones")
            self._write([*entries, entry], serving)
        return entry

    def serving(self) -> ServingRecord | None:
        """The promoted version, or None when none ever was (planners then serve the latest)."""
        with self._lock:
            return self._read_index()[1]

    def serving_entry(self) -> PolicyEntry:
        """The entry planners serve for an empty policy_version: the promoted one, else the latest."""
        record = self.serving()
        return self.get(record.version if record else "")

    def set_serving(self, version: str, reason: str) -> tuple[ServingRecord | None, ServingRecord]:
        """Promote (or roll back to) a published `version`, durably; returns (previous, now).
        NotFound for a version never published, InvalidInput for a malformed one or an empty reason."""
        if not reason.strip():
            raise InvalidInput("reason is empty: say why this version serves (e.g. 'canary passed: ...')")
        number = parse_version(version)
        with self._lock:
            entries, previous = self._read_index()
            if not any(e.number == number for e in entries):
                raise NotFound(f"policy version {version!r} is not published in {self.directory}")
            now = ServingRecord(version_name(number), reason.strip(), int(time.time() * 1000))
            self._write(entries, now)
        return previous, now
