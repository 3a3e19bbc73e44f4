"""StackHealthWorkflow: asks every service for its gRPC health through Temporal.

It is the main job until the training loop lands, and proves the worker, the server and every
service answer. Workflow and activity side by side, as in temporalio's samples.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    from evoskill.platform.config import SERVICES, Settings
    from evoskill.platform.rpc import check_health


@activity.defn
async def check_service_health(service: str) -> bool:
    settings = Settings()
    return await check_health(settings.endpoint(service).target, settings=settings.grpc)


@workflow.defn
class StackHealthWorkflow:
    @workflow.run
    async def run(self) -> dict[str, bool]:
        results: dict[str, bool] = {}
        for service in SERVICES:
            results[service] = await workflow.execute_activity(
                check_service_health, service, start_to_close_timeout=timedelta(seconds=10)
            )
        return results
