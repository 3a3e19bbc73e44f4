"""TrainingWorkflow's worker registration; `python -m evoskill.orchestrator.training.worker` runs it alone."""

from __future__ import annotations

from evoskill.orchestrator.registration import Registration, serve
from evoskill.orchestrator.training.activities import TrainingActivities
from evoskill.orchestrator.training.workflow import TrainingWorkflow

REGISTRATION = Registration(workflows=(TrainingWorkflow,),
                            activities=lambda settings: TrainingActivities(settings).all())

if __name__ == "__main__":
    serve(REGISTRATION)
