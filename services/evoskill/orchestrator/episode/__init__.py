"""EpisodeWorkflow: one episode played by the planner, the root of an episode's trace."""
