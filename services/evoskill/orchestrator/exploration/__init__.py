"""ExplorationWorkflow: shadow, canary, promotion or rollback, watch; its activities and pure logic."""
