"""ExplorationWorkflow's worker registration: its own activities and the training's play_episode, which plays its
canary and watch episodes; `python -m evoskill.orchestrator.exploration.worker` runs it alone."""

from __future__ import annotations

from evoskill.orchestrator.exploration.activities import ExplorationActivities
from evoskill.orchestrator.exploration.workflow import ExplorationWorkflow
from evoskill.orchestrator.registration import Registration, serve
from evoskill.orchestrator.training.activities import TrainingActivities

REGISTRATION = Registration(
    workflows=(ExplorationWorkflow,),
    activities=lambda settings: [*ExplorationActivities(settings).all(), TrainingActivities(settings).play_episode])

if __name__ == "__main__":
    serve(REGISTRATION)
