"""StackHealthWorkflow: asks every service for its gRPC health through Temporal.

It is the main job's first step, and proves the worker, the server and every service answer. Workflow and
activity side by side, as in temporalio's samples; the activity asks the services where the worker's settings
say they are (a worker started on other ports, in a test or a container, reaches its own).
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    from evoskill.platform.config import SERVICES, Settings
    from evoskill.platform.rpc import check_health


class HealthActivities:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    @activity.defn(name="check_service_health")
    async def check_service_health(self, service: str) -> bool:
        return await check_health(self.settings.endpoint(service).target, settings=self.settings.grpc)


@workflow.defn
class StackHealthWorkflow:
    @workflow.run
    async def run(self) -> dict[str, bool]:
        results: dict[str, bool] = {}
        for service in SERVICES:
            results[service] = await workflow.execute_activity_method(
                HealthActivities.check_service_health, service, start_to_close_timeout=timedelta(seconds=10)
            )
        return results
