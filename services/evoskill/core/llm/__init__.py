"""The LLM inside the search, its pure parts: the prompts, reading the answers (rankings of the listed
candidates and new actions, checked against the environment's grammar where it has one) and combining the
LLM's priors with θ's. No network here: the client is the planner's (planner/llm.py)."""

from evoskill.core.llm.priors import COMBINE_RULES, combine, llm_prior
from evoskill.core.llm.prompt import (
    LlmAnswer,
    Prompt,
    grammar_of,
    parse_answer,
    parse_choices,
    parse_value,
    prompt,
    value_prompt,
)

__all__ = ["COMBINE_RULES", "LlmAnswer", "Prompt", "combine", "grammar_of", "llm_prior", "parse_answer",
           "parse_choices", "parse_value", "prompt", "value_prompt"]
