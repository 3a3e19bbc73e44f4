"""The reader's inputs: a state cut into segments and clauses, candidates packed, exact-match features."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evoskill.bench.reader import features_one_by_one
from evoskill.core.learn import TokenFeaturizer, text_encoder_from_spec
from evoskill.core.learn.tokens import (
    GOAL,
    GOAL_TOKENS,
    INVENTORY,
    LEGACY_GOAL_TOKENS,
    MATCH_FEATURES,
    NOTES,
    OBSERVATION,
    START,
    StateTokens,
)
from evoskill.core.state_text import candidate_text
from evoskill.platform.config import LearnerSettings

GOAL_TEXT = "Cook a meal.\nNotes: Ingredients:\n  red potato\nDirections:\n  slice the red potato\n  fry the carrot"
OBS_TEXT = "You see a red potato and a carrot.\nInventory:\n  a knife"


def features(f: TokenFeaturizer, candidate: str) -> dict[str, np.ndarray]:
    inputs = f.make_inputs(lambda t: 0, [(GOAL_TEXT, OBS_TEXT)], [[(candidate, "")]])
    rows = inputs.cand_match[0][inputs.cand_ids[0] != 0]
    return {name: rows[:, k] for k, name in enumerate(MATCH_FEATURES)}


@pytest.fixture(scope="module", params=["hash", "minilm"])
def featurizer(request: pytest.FixtureRequest) -> TokenFeaturizer:
    return TokenFeaturizer(request.param, dim=16, buckets=512)


def test_a_state_is_read_in_segments_and_clauses(featurizer: TokenFeaturizer) -> None:
    state = featurizer.state(GOAL_TEXT, OBS_TEXT)
    segments = list(dict.fromkeys(state.seg.tolist()))
    assert segments == [START, GOAL, NOTES, OBSERVATION, INVENTORY]
    assert state.ids[0] == featurizer.start and len(state.ids) == len(state.seg) == len(state.clause)
    assert (np.diff(state.clause) >= 0).all()
    # One clause per recipe line: "slice the red potato" and "fry the carrot" are read apart.
    slice_id, fry_id = featurizer.ids("slice")[0], featurizer.ids("fry")[0]
    assert state.clause[state.ids == slice_id][0] != state.clause[state.ids == fry_id][0]
    assert featurizer.state(GOAL_TEXT, OBS_TEXT) is state  # cached


def test_the_candidate_the_recipe_names_matches_it_word_for_word(featurizer: TokenFeaturizer) -> None:
    right, wrong = features(featurizer, "slice red potato"), features(featurizer, "dice red potato")
    assert right["in notes"].all() and right["notes line coverage"][0] == 1.0
    assert right["pair in notes"][1:].all()  # "slice red" one word apart in "slice the red potato"
    assert wrong["in notes"].tolist() == [0, 1, 1] and wrong["notes line coverage"][0] == pytest.approx(2 / 3)
    assert not wrong["pair in notes"][1]
    assert right["first token"].tolist() == [1, 0, 0]
    carried = features(featurizer, "drop knife")
    assert carried["in inventory"].tolist() == [0, 1] and not carried["in notes"].any()


def test_the_been_there_mark_is_a_feature_not_tokens(featurizer: TokenFeaturizer) -> None:
    ids, seen = featurizer.candidate(candidate_text("move west", True))
    assert seen and ids == featurizer.candidate("move west")[0]
    assert features(featurizer, candidate_text("move west", True))["been there"].all()
    assert not features(featurizer, "move west")["been there"].any()


def test_candidates_are_packed_and_padded(featurizer: TokenFeaturizer) -> None:
    states = [(GOAL_TEXT, OBS_TEXT), ("Find the coin.", "")]
    candidates = [[("take red potato", "take X"), ("go north", "go X")], [("take coin", "take X")]]
    inputs = featurizer.make_inputs({"take X": 1, "go X": 2}.get, states, candidates)
    lengths = [len(featurizer.ids(text)) for text, _ in candidates[0]]
    assert inputs.cand_ids.shape[1] == sum(lengths)
    assert inputs.cand_slot[0].tolist() == [0] * lengths[0] + [1] * lengths[1]
    real = inputs.cand_ids[1] != 0
    assert real.sum() == len(featurizer.ids("take coin")) and (inputs.cand_slot[1][real] == 0).all()
    assert inputs.mask.tolist() == [[True, True], [True, False]]
    assert inputs.template_ids.tolist() == [[1, 2], [1, 0]]
    assert (inputs.ctx_seg[1] > 0).sum() == len(featurizer.state("Find the coin.", "").ids)


def test_spec_round_trip_and_bad_vocabulary() -> None:
    f = TokenFeaturizer("hash", dim=8, buckets=64)
    again = text_encoder_from_spec(f.spec)
    assert isinstance(again, TokenFeaturizer) and again.spec == f.spec == {
        "kind": "tokens", "vocab": "hash", "dim": 8, "buckets": 64, "goal_tokens": GOAL_TOKENS}
    assert again.ids("slice the red potato") == f.ids("slice the red potato")  # stable across processes
    with pytest.raises(ValueError, match="unknown token vocabulary"):
        TokenFeaturizer("bytes")


def test_minilm_table_starts_from_its_embeddings() -> None:
    f = TokenFeaturizer("minilm", dim=16)
    table = f.initial_table()
    assert table.shape == (f.vocab_size, 16) and np.allclose(table.std(0), 1.0, atol=1e-3)
    roast, roasted, piano = (table[f.ids(w)[0]] for w in ("roast", "roasted", "piano"))
    assert np.linalg.norm(roast - roasted) < np.linalg.norm(roast - piano)


def test_the_goal_is_read_up_to_the_cap_its_theta_records() -> None:
    goal = " ".join(f"word{i}" for i in range(150))
    assert LearnerSettings().reader_goal_tokens == GOAL_TOKENS  # the setting's default is the featuriser's
    new = TokenFeaturizer("hash", dim=8, buckets=64)
    assert int((new.state(goal, "").seg == GOAL).sum()) == 150 and new.spec["goal_tokens"] == GOAL_TOKENS
    old = TokenFeaturizer.from_spec({"kind": "tokens", "vocab": "hash", "dim": 8, "buckets": 64})  # before the cap
    assert int((old.state(goal, "").seg == GOAL).sum()) == LEGACY_GOAL_TOKENS
    assert TokenFeaturizer.from_spec(TokenFeaturizer("hash", 8, 64, goal_tokens=20).spec).spec["goal_tokens"] == 20


clause_tokens = st.lists(st.integers(3, 14), min_size=1, max_size=5).map(tuple)


@settings(max_examples=60, deadline=None)
@given(segments=st.lists(st.tuples(st.sampled_from([GOAL, NOTES, OBSERVATION, INVENTORY]), clause_tokens),
                         max_size=9),
       cands=st.lists(st.tuples(st.lists(st.integers(3, 16), min_size=1, max_size=6).map(tuple), st.booleans()),
                      min_size=1, max_size=8))
def test_a_rows_features_read_at_once_equal_those_read_one_candidate_at_a_time(
        segments: list[tuple[int, tuple[int, ...]]], cands: list[tuple[tuple[int, ...], bool]]) -> None:
    """States of up to 9 clauses over a small vocabulary (so tokens recur across clauses and scores tie) and rows
    of up to 8 candidates, some tokens repeated within one: every feature and every clause named is as the
    per-candidate reading gave it, read at once and then again from what the state remembers."""
    by_seg: dict[int, list[tuple[int, tuple[int, ...]]]] = {}
    for number, (seg, tokens) in enumerate(segments, start=2):
        by_seg.setdefault(seg, []).append((number, tokens))
    empty = np.zeros(0, np.int64)
    state = StateTokens(empty, empty, empty, by_seg)
    again = [*cands[::-1], cands[0], ((99,), False)]  # read again in another order, one repeated, one new
    for row in (cands, again):  # the second from what the first remembered
        match, named = state.features(row)
        expected_match, expected_named = features_one_by_one(by_seg, row)
        np.testing.assert_allclose(match, expected_match, rtol=1e-6)
        np.testing.assert_array_equal(named, expected_named)


def test_the_candidate_names_the_notes_line_it_shares_most_with(featurizer: TokenFeaturizer) -> None:
    candidate = [("slice the red potato with the knife", "")]
    inputs = featurizer.make_inputs(lambda t: 0, [(GOAL_TEXT, OBS_TEXT)], [candidate])
    state = featurizer.state(GOAL_TEXT, OBS_TEXT)
    named = int(inputs.cand_lines[0, 0, 0])
    assert state.ids[state.clause == named].tolist() == list(featurizer.ids("slice the red potato"))
