"""The CLI's clients: starters of the orchestrator's workflows (training, the main job) and of the
planner's episodes (solve, eval; also played by the orchestrator's activities and the pipeline bench)."""
