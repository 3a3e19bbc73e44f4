"""TrainingWorkflow: the outer loop (play, train, evaluate, record per epoch), its activities and pure logic."""
