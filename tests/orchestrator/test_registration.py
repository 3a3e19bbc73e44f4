"""The stack's orchestrator worker registers every workflow's registration: each workflow once, each activity
name once (the training's play_episode serves the exploration too), and nothing a registration lacks."""

from __future__ import annotations

from evoskill.orchestrator import registration
from evoskill.orchestrator.worker import REGISTRATIONS, WORKFLOWS
from evoskill.platform.config import Settings
from tests.orchestrator.conftest import activity_names


def test_every_workflow_and_every_activity_name_once() -> None:
    settings = Settings()
    names = activity_names(registration.activities(settings, REGISTRATIONS))
    assert len(names) == len(set(names))
    assert set(names) == {n for r in REGISTRATIONS for n in activity_names(r.activities(settings))}
    assert "training.play_episode" in names
    assert len(WORKFLOWS) == len(set(WORKFLOWS)) == 3
