"""evoskill: tool-using agents that improve their own skills."""

__version__ = "0.1.0"
