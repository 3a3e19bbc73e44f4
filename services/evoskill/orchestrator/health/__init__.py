"""StackHealthWorkflow: every service's gRPC health through Temporal."""
