"""An optional LLM (any OpenAI-compatible chat-completions endpoint) as advice for the search.

The LLM sees the goal, the current observation, a few tips distilled from retrieved memories
(core/memory/fusion.py) and the numbered candidate actions, and answers with the numbers of the best
ones, best first ("3, 1"). That ranking becomes a bounded logit bonus at the root (`rank`) or a
rollout-policy step (`choose`).
The LLM is advice, never a dependency: any HTTP error, timeout or unparseable reply gives a zero bonus
(or None) and a logged warning, and the search goes on with its own priors.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence
from typing import Any

import httpx
import numpy as np

from evoskill.platform.config import Settings
from evoskill.platform.telemetry import tracer

log = logging.getLogger(__name__)

SYSTEM_PROMPT = (
    "You advise an agent that plays a text-based game. You are given the agent's goal, its current "
    "observation, tips from similar past situations and a numbered list of candidate actions. Answer with "
    "the numbers of the best actions to take now, best first, separated by commas (for example: 3, 1). "
    "Answer with the numbers only."
)
MAX_STATE_CHARS = 4000  # long observations are cut so one request stays small and fast
MAX_TOKENS = 64  # the answer is a few numbers; a bound keeps latency bounded too
_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)  # reasoning models' scratchpad
_NUMBER = re.compile(r"\b\d+\b")


def parse_choices(reply: str, actions: Sequence[str]) -> list[int]:
    """Indices (0-based, distinct, best first) of the actions a reply names, by number (1-based) or by text.

    The reply is read left to right; at each point the longest candidate action written there wins over a
    number, so "go to room 2" echoed is that action, not action 2. Numbers out of range are ignored.
    """
    text = _THINK.sub(" ", reply).lower()
    by_text = sorted(((a.strip().lower(), i) for i, a in enumerate(actions) if a.strip()), key=lambda t: -len(t[0]))
    matches: list[tuple[int, int, int]] = []  # (start, end, action index)
    taken = [False] * len(text)
    for action, i in by_text:  # longest first, so a shorter action inside a longer one is not matched again
        for m in re.finditer(rf"(?<!\w){re.escape(action)}(?!\w)", text):
            if not any(taken[m.start():m.end()]):
                taken[m.start():m.end()] = [True] * (m.end() - m.start())
                matches.append((m.start(), m.end(), i))
    for m in _NUMBER.finditer(text):
        number = int(m.group())
        if 1 <= number <= len(actions) and not any(taken[m.start():m.end()]):
            matches.append((m.start(), m.end(), number - 1))
    choices: list[int] = []
    for _, _, i in sorted(matches):
        if i not in choices:
            choices.append(i)
    return choices


def choice_bonus(choices: Sequence[int], n: int, weight: float) -> np.ndarray:
    """A logit bonus per action: weight / (1 + rank) for the chosen ones (weight, weight/2, ...), 0 otherwise."""
    bonus = np.zeros(n, dtype=np.float64)
    for rank, i in enumerate(choices):
        bonus[i] = weight / (1 + rank)
    return bonus


def user_message(goal: str, state: str, actions: Sequence[str], tips: Sequence[str]) -> str:
    observation = state if len(state) <= MAX_STATE_CHARS else state[:MAX_STATE_CHARS] + " ..."
    lines = [f"Goal: {goal}", "", "Current observation:", observation.strip(), ""]
    if tips:
        lines += ["Tips from similar past situations:", *(f"- {t}" for t in tips), ""]
    lines += ["Candidate actions:", *(f"{i}. {a}" for i, a in enumerate(actions, 1)), ""]
    lines.append("Best actions (numbers, best first):")
    return "\n".join(lines)


class LlmProposer:
    """Ranks candidate actions with one chat-completions request; thread-safe (search runs in threads)."""

    def __init__(self, base_url: str, model: str, *, api_key: str = "", timeout_s: float = 5.0,
                 prior_weight: float = 1.0, temperature: float = 0.0, max_tips: int = 3) -> None:
        if not base_url:
            raise ValueError("LlmProposer needs a base_url (an OpenAI-compatible API, e.g. http://host:8000/v1)")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.prior_weight = prior_weight
        self.temperature = temperature
        self.max_tips = max_tips
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(timeout=timeout_s, headers=headers)
        self.requests = 0
        self.failures = 0

    def request_body(self, goal: str, state: str, actions: Sequence[str], tips: Sequence[str]) -> dict[str, Any]:
        return {
            "model": self.model,
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": user_message(goal, state, actions, list(tips)[: self.max_tips])},
            ],
            "temperature": self.temperature,
            "max_tokens": MAX_TOKENS,
        }

    def choices(self, goal: str, state: str, actions: Sequence[str], tips: Sequence[str]) -> list[int]:
        """Indices of the actions the LLM recommends, best first; [] when it gives nothing usable."""
        if len(actions) < 2:  # nothing to choose between: spare the request
            return [0] if actions else []
        with tracer().start_as_current_span("planner.llm") as span:
            span.set_attribute("llm.actions", len(actions))
            self.requests += 1
            try:
                response = self._client.post(self.url, json=self.request_body(goal, state, actions, tips))
                response.raise_for_status()
                reply = response.json()["choices"][0]["message"]["content"]
                if not isinstance(reply, str):
                    raise TypeError(f"message content is {type(reply).__name__}, not text")
            except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as error:
                self.failures += 1
                span.set_attribute("llm.error", f"{type(error).__name__}: {error}")
                log.warning("LLM at %s gave no advice (%s: %s); searching without it",
                            self.url, type(error).__name__, error)
                return []
            picked = parse_choices(reply, actions)
            span.set_attribute("llm.choices", len(picked))
            if not picked:
                self.failures += 1
                log.warning("LLM reply names no candidate action (%r); searching without it", reply[:200])
            return picked

    def rank(self, goal: str, state: str, actions: Sequence[str], tips: Sequence[str]) -> np.ndarray:
        """A logit bonus per action (aligned with `actions`): prior_weight / (1 + rank) for the LLM's picks."""
        picked = self.choices(goal, state, actions, tips) if len(actions) > 1 else []
        return choice_bonus(picked, len(actions), self.prior_weight)

    def choose(self, goal: str, state: str, actions: Sequence[str], tips: Sequence[str]) -> int | None:
        """A rollout-policy step: the index of the LLM's first choice, None when it gives nothing."""
        picked = self.choices(goal, state, actions, tips)
        return picked[0] if picked else None

    def close(self) -> None:
        self._client.close()


def from_settings(settings: Settings) -> LlmProposer | None:
    """The configured LLM, or None when `llm.base_url` is empty (the search then runs on its own priors)."""
    llm = settings.llm
    if not llm.base_url:
        return None
    return LlmProposer(
        llm.base_url, llm.model, api_key=os.environ.get(llm.api_key_env, "") if llm.api_key_env else "",
        timeout_s=llm.timeout_s, prior_weight=llm.prior_weight, temperature=llm.temperature, max_tips=llm.max_tips,
    )
