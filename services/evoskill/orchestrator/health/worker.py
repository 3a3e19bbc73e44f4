"""StackHealthWorkflow's worker registration; `python -m evoskill.orchestrator.health.worker` runs it alone."""

from __future__ import annotations

from evoskill.orchestrator.health.workflow import HealthActivities, StackHealthWorkflow
from evoskill.orchestrator.registration import Registration, serve

REGISTRATION = Registration(workflows=(StackHealthWorkflow,),
                            activities=lambda settings: [HealthActivities(settings).check_service_health])

if __name__ == "__main__":
    serve(REGISTRATION)
