"""The LLM inside the search: any OpenAI-compatible chat-completions endpoint, through the official SDK.

`LlmClient` is the transport: `AsyncOpenAI` on an event loop of its own (the searches run in worker
threads and call it blocking), with the SDK's timeout and retries with exponential backoff (`llm.timeout_s`,
`llm.max_retries`), at most `llm.concurrency` requests in flight across all searches, answers cached by
their whole prompt (`llm.cache_size`, `llm.cache_ttl_s`), and every request counted into the caller's
`Usage` (the step's: planner/agents.py puts it into the episode; priced by `llm.*_usd_per_mtok`) and the
`evoskill.llm.*` metrics.

`LlmAdvisor` is what the search calls at a new node (`SearchModel.propose`), at the states it evaluates
(`judge`, llm.value_weight) and in its rollouts (`rollout_policy`, llm.rollout_steps): the prompt, the answer
read and checked (core/llm), tips from retrieved memories. The LLM is advice, never a dependency: an error, a
timeout or an answer that names nothing usable gives None with a logged reason, and the search goes on
with its own priors (θ's, or uniform).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import json
import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import openai
from cachetools import TTLCache

from evoskill.common.v1 import common_pb2
from evoskill.core.llm import LlmAnswer, Prompt, grammar_of, parse_answer, parse_choices, prompt
from evoskill.core.llm.prompt import parse_value, value_prompt
from evoskill.core.search.model import JudgeFn, Path, ProposeFn, RolloutFn, SearchModel
from evoskill.core.state_text import state_text
from evoskill.platform.config import LlmSettings, Settings
from evoskill.platform.metrics import instruments
from evoskill.platform.telemetry import tracer

log = logging.getLogger(__name__)

NO_KEY = "EMPTY"  # what a server that wants no key is sent (vLLM's convention; the SDK insists on one)
BACKOFF_CAP_S = 8.0  # the SDK's longest wait between retries


# What the LLM cost one step (or an episode), counted in place: the message the events carry.
Usage = common_pb2.LlmUsage


class LlmClient:
    """Chat completions, blocking, from any thread (see the module docstring)."""

    def __init__(self, settings: LlmSettings, api_key: str = "") -> None:
        if not settings.base_url:
            raise ValueError("the LLM client needs llm.base_url (an OpenAI-compatible API, e.g. http://host:8000/v1)")
        self.settings = settings
        self.url = settings.base_url.rstrip("/")
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="llm-client", daemon=True)
        self._thread.start()
        self._openai = openai.AsyncOpenAI(base_url=self.url, api_key=api_key or NO_KEY, timeout=settings.timeout_s,
                                          max_retries=settings.max_retries)
        self._slots = asyncio.Semaphore(settings.concurrency)
        self._cache: TTLCache[str, tuple[str, int, int]] | None = (
            TTLCache(settings.cache_size, settings.cache_ttl_s) if settings.cache_size else None)
        self._lock = threading.Lock()  # the cache's and the usage counters': searches and judges in threads share them
        self.in_flight = 0
        self.most_in_flight = 0  # the concurrency limit at work (read by tests)
        # The SDK bounds each try; this bounds the whole call, retries and their backoff included.
        self._deadline_s = (settings.max_retries + 1) * settings.timeout_s + settings.max_retries * BACKOFF_CAP_S + 1

    def key(self, request: Prompt) -> str:
        body = {"model": self.settings.model, "messages": request.messages(), "max_tokens": request.max_tokens,
                "temperature": self.settings.temperature}
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()

    def complete(self, request: Prompt, usage: Usage) -> str | None:
        """The answer's text; None, with the reason logged, when there is none (counted into `usage`)."""
        counters = instruments()
        key = self.key(request)
        with self._lock:
            usage.requests += 1
            hit = self._cache.get(key) if self._cache is not None else None
            if hit is not None:
                usage.cached += 1
        if hit is not None:
            counters.llm_requests.add(1, {"outcome": "cached"})
            return hit[0]
        with tracer().start_as_current_span("planner.llm") as span:
            future = asyncio.run_coroutine_threadsafe(self._request(request), self._loop)
            try:
                text, prompt_tokens, completion_tokens = future.result(timeout=self._deadline_s)
            except (openai.OpenAIError, concurrent.futures.TimeoutError, ValueError, TypeError, LookupError,
                    AttributeError) as error:
                future.cancel()
                self.failed(usage)
                counters.llm_requests.add(1, {"outcome": "failed"})
                span.set_attribute("llm.error", f"{type(error).__name__}: {error}")
                log.warning("LLM at %s gave no answer (%s: %s); searching without it", self.url,
                            type(error).__name__, error)
                return None
            span.set_attribute("llm.prompt_tokens", prompt_tokens)
            span.set_attribute("llm.completion_tokens", completion_tokens)
        with self._lock:
            usage.prompt_tokens += prompt_tokens
            usage.completion_tokens += completion_tokens
            usage.cost_usd += (prompt_tokens * self.settings.prompt_usd_per_mtok
                               + completion_tokens * self.settings.completion_usd_per_mtok) / 1e6
        counters.llm_requests.add(1, {"outcome": "answered"})
        counters.llm_tokens.add(prompt_tokens, {"kind": "prompt"})
        counters.llm_tokens.add(completion_tokens, {"kind": "completion"})
        if self._cache is not None:
            with self._lock:
                self._cache[key] = (text, prompt_tokens, completion_tokens)
        return text

    def failed(self, usage: Usage) -> None:
        """Count a request that failed or whose answer was unusable into `usage` (from any thread)."""
        with self._lock:
            usage.failures += 1

    async def _request(self, request: Prompt) -> tuple[str, int, int]:
        async with self._slots:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            try:
                response = await self._openai.chat.completions.create(
                    model=self.settings.model, messages=request.messages(),  # type: ignore[arg-type]
                    temperature=self.settings.temperature, max_tokens=request.max_tokens)
            finally:
                self.in_flight -= 1
        text = response.choices[0].message.content
        if not isinstance(text, str):
            raise TypeError(f"message content is {type(text).__name__}, not text")
        used = response.usage  # None where the server does not say: counted as 0 tokens
        return text, used.prompt_tokens if used else 0, used.completion_tokens if used else 0

    def close(self) -> None:
        if self._loop.is_closed():
            return
        asyncio.run_coroutine_threadsafe(self._openai.close(), self._loop).result(timeout=5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()


@dataclass
class LlmAdvisor:
    """The LLM at a search's new nodes: which nodes it is asked at, what it is asked, its answer read."""

    client: LlmClient
    tips: Sequence[str] = ()  # from the memories retrieved for the step's root (core/memory/fusion.py)
    taken: Sequence[str] = ()  # the episode's actions before the step
    spent: int = 0  # LLM tokens the episode spent before the step (llm.episode_tokens bounds them)

    @property
    def settings(self) -> LlmSettings:
        return self.client.settings

    def proposer(self, usage: Usage) -> ProposeFn:
        """`SearchModel.propose` for one step, its requests counted into `usage`."""

        def propose(model: SearchModel, path: Path) -> LlmAnswer | None:
            return self.answer(model, path, usage) if len(path) <= self.settings.depth else None

        return propose

    def answer(self, model: SearchModel, path: Path, usage: Usage,
               candidates: tuple[list[str], list[str]] | None = None) -> LlmAnswer | None:
        """The LLM's answer at `path`: a ranking of its candidates (default: the ones search considers, so that no
        no-op wastes a choice; else (actions, templates)), or new actions where it lists few (and where it lists
        more than llm.max_listed, shown by kind)."""
        if self.over_budget(usage):
            return None
        observation = model.observation(path)
        actions, kinds = candidates or (list(model.actions(path)), model.templates(path))
        goal, state = state_text(observation, model.notes_at(path))
        propose = len(actions) < self.settings.propose_below
        if not propose and len(actions) < 2:
            return None  # nothing to choose between: spare the request
        request = prompt(goal, state, actions, list(self.tips)[: self.settings.max_tips], propose=propose,
                         limit=self.settings.max_proposals, taken=[*self.taken, *path],
                         kinds=kinds, max_listed=self.settings.max_listed)
        reply = self.client.complete(request, usage)
        if reply is None:
            return None
        if request.propose:  # a long list is shown by kind, and the LLM proposes there too
            answer = parse_answer(reply, actions, grammar_of(observation.goal), self.settings.max_proposals,
                                  request.numbered)
            for line, why in answer.rejected:
                log.info("LLM line %r is no action here: %s", line[:200], why)
        else:
            answer = LlmAnswer([actions[i] for i in parse_choices(reply, actions)])
        if not answer.ranked:
            self.client.failed(usage)
            log.warning("LLM answer names no usable action (%r); searching without it", reply[:200])
            return None
        return answer

    def rollout_policy(self, usage: Usage) -> RolloutFn | None:
        """`SearchModel.rollout_policy` for one step (None where llm.rollout_steps is 0): the first llm.rollout_steps
        steps of each leaf's rollout are the LLM's first choice among the actions that may change the world (or an
        action it writes, where it proposes); without an answer the rest of the rollout is random."""
        steps = self.settings.rollout_steps
        if not steps:
            return None

        def choose(model: SearchModel, path: Path, k: int) -> str | None:
            if k >= steps:
                return None
            answer = self.answer(model, path, usage, model.rollout_candidates(path))
            return answer.ranked[0] if answer is not None else None

        return choose

    def judge(self, usage: Usage, win: float) -> JudgeFn | None:
        """`SearchModel.judge` for one step, its requests counted into `usage` (None where llm.value_weight is 0):
        below the root, the LLM's chance p of completing the goal from a state enters its value as (1 - w) * value +
        w * p * `win` (w = llm.value_weight; `win`, what a won ending earns on the search's reward scale); where it
        gives no number, the value stays the search's own."""
        weight, most = self.settings.value_weight, self.settings.concurrency
        if not weight:
            return None

        def judge(model: SearchModel, paths: Sequence[Path], values: np.ndarray) -> np.ndarray:
            asked = [i for i, p in enumerate(paths) if p]
            if len(asked) > 1:  # a batch of leaves asked at once, up to llm.concurrency in flight
                with concurrent.futures.ThreadPoolExecutor(min(most, len(asked)), "llm-judge") as pool:
                    chances = list(pool.map(lambda i: self.chance(model, paths[i], usage), asked))
            else:
                chances = [self.chance(model, paths[i], usage) for i in asked]
            judged = np.array(values, dtype=np.float64)
            for i, chance in zip(asked, chances, strict=True):
                if chance is not None:
                    judged[i] = (1.0 - weight) * judged[i] + weight * chance * win
            return judged

        return judge

    def chance(self, model: SearchModel, path: Path, usage: Usage) -> float | None:
        """The LLM's chance, in [0, 1], that the agent completes its goal from `path`; None without an answer."""
        if self.over_budget(usage):
            return None
        goal, state = state_text(model.observation(path), model.notes_at(path))
        reply = self.client.complete(value_prompt(goal, state, [*self.taken, *path]), usage)
        if reply is None:
            return None
        chance = parse_value(reply)
        if chance is None:
            self.client.failed(usage)
            log.warning("LLM judged a state without a number (%r); its value stays the search's", reply[:200])
        return chance

    def over_budget(self, usage: Usage) -> bool:
        """Whether the episode has spent llm.episode_tokens (checked before each request: the one that crosses
        the bound is its last); from then on its search and its `llm` steps go on without the LLM."""
        budget = self.settings.episode_tokens
        return budget > 0 and self.spent + usage.prompt_tokens + usage.completion_tokens >= budget


def from_settings(settings: Settings) -> LlmClient | None:
    """The configured LLM's client, or None when `llm.base_url` is empty (the search runs on its own priors)."""
    llm = settings.llm
    if not llm.base_url:
        return None
    return LlmClient(llm, os.environ.get(llm.api_key_env, "") if llm.api_key_env else "")
