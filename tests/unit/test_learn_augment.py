"""Renamed worlds (core/learn/augment.py): which words are names, consistent swaps, and that training on
renamed steps makes θ match the goal's object where training on the raw steps learns the training names."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from evoskill.core.learn import Example, Learner, TokenFeaturizer, TorchPolicy, TrainConfig
from evoskill.core.learn.augment import goal_names, rename_batch, renamed_step, swap_words
from evoskill.platform.config import LearnerSettings

ANIMALS = ("turtle", "wolf", "parrot", "frog", "beaver", "moth", "crocodile", "toad")
GOAL = "Your task is to focus on the life stages of the turtle."
ACTIONS = ["focus on egg turtle", "focus on egg parrot", "look around", "open door to kitchen"]


def test_names_are_goal_words_of_the_taken_action_less_verbs_and_short_words() -> None:
    assert goal_names(GOAL, ACTIONS, 0) == ["turtle"]  # "focus" starts candidates, "on" is short
    assert goal_names(GOAL, ACTIONS, 2) == []
    assert goal_names(GOAL, ACTIONS, -1) == []


def test_a_swap_goes_both_ways_on_whole_words_only() -> None:
    mapping = {"turtle": "parrot", "parrot": "turtle"}
    assert swap_words("a Turtle egg, a parrot egg, turtles", mapping) == "a parrot egg, a turtle egg, turtles"


def test_a_renamed_step_keeps_its_demonstrated_action_right() -> None:
    goal, _, row = renamed_step(GOAL, "You see a turtle egg and a parrot egg.", ACTIONS, 0, [],
                                          np.random.default_rng(0)) or ("", "", [])
    (partner,) = goal_names(goal, row, 0)
    swap = {"turtle": partner, partner: "turtle"}  # the world renamed both ways: the partner's old word is the turtle
    assert partner != "turtle" and row[0] == f"focus on egg {partner}"
    assert row == [swap_words(a, swap) for a in ACTIONS] and goal == swap_words(GOAL, swap)


def test_share_zero_changes_nothing_and_draws_nothing() -> None:
    rng = np.random.default_rng(0)
    states, rows = [(GOAL, "obs")], [[(a, "t") for a in ACTIONS]]
    assert rename_batch(states, rows, [0], 0.0, rng) == (states, rows)
    assert rng.random() == np.random.default_rng(0).random()


def focus_examples(targets: Sequence[str], n: int, seed: int) -> list[Example]:
    """The goal names one animal; the room holds it and three others; the demonstrated step focuses on it."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        target = targets[rng.integers(len(targets))]
        room = [target, *rng.choice([a for a in ANIMALS if a != target], 3, replace=False)]
        rng.shuffle(room)
        actions = (*(f"focus on egg {a}" for a in room), "look around", "wait")
        taken = actions.index(f"focus on egg {target}")
        visits = np.zeros(len(actions), np.float32)
        visits[taken] = 1.0
        out.append(Example(f"f{seed}-{i}", 0, f"Your task is to focus on the life stages of the {target}.",
                           "Here you see: " + ", ".join(f"a {a} egg" for a in room), actions,
                           tuple(a.split()[0] + " X" for a in actions), visits, np.zeros(len(actions), np.float32),
                           np.zeros(len(actions), bool), float("nan"), taken, 1.0))
    return out


def held_out_accuracy(rename_share: float) -> float:
    """θ cloned on steps whose targets are the turtle or the wolf, scored where the goal names other animals
    (and the turtle and wolf may be in the room)."""
    learner = Learner(TokenFeaturizer("hash", dim=16, buckets=1024),
                      LearnerSettings(lr=3e-3, batch_size=16, rename_share=rename_share),
                      TrainConfig(hidden=32, skill_dim=8, max_skills=64, width=32, seed=0))
    train = focus_examples(("turtle", "wolf"), 64, seed=0)
    held_out = focus_examples(("parrot", "frog", "beaver", "moth"), 64, seed=1)
    rng = np.random.default_rng(0)
    for _ in range(150):
        learner.update(learner.collate([train[i] for i in rng.integers(len(train), size=16)], rename=True))
    priors, _ = TorchPolicy(learner.net, learner.vocab, learner.featurizer).score(
        [(ex.goal, ex.observation) for ex in held_out], [ex.candidates() for ex in held_out])
    return float(np.mean([int(np.argmax(p)) == ex.taken for p, ex in zip(priors, held_out, strict=True)]))


def test_renamed_worlds_teach_matching_the_goal_not_the_training_names() -> None:
    renamed, raw = held_out_accuracy(0.5), held_out_accuracy(0.0)
    assert renamed >= 0.9 > raw  # chance is 1/6; raw cloning learns "turtle" and "wolf" (0.34 at this seed)
