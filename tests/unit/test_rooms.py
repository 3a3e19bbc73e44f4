"""What θ can read of the episode beyond the state: its map of rooms (core/rooms.py), read from the
environments' own phrasing and walked in search as if real, with the same marks on the candidates in training
as in serving; and its last actions, the path's own after the episode's."""

from __future__ import annotations

from evoskill.common.v1.common_pb2 import Observation
from evoskill.core.learn import episode_examples
from evoskill.core.learn.networks import NetConfig
from evoskill.core.learn.tokens import TokenFeaturizer
from evoskill.core.reward import Scorer
from evoskill.core.rooms import RoomMap, leads_mark, room_of, way_back
from evoskill.core.search import SearchConfig
from evoskill.core.search.model import SearchModel
from evoskill.core.state_text import SEEN_MARK, candidate_text
from evoskill.platform.config import RewardSettings
from evoskill.sandbox.host import EnvHost
from tests.unit.test_learn_data import make_episode, make_step


def test_the_room_is_read_from_each_environments_phrasing() -> None:
    assert room_of(Observation(look="-= Spare Room =-\nYou arrive in a spare room.")) == "spare room"  # TextWorld
    assert room_of(Observation(look="This room is called the art studio. In it, you see:")) == "art studio"
    assert room_of(Observation(look="This outside location is called the outside. Here you see:")) == "outside"
    assert room_of(Observation(text="You are in the living room. You see a sofa.")) == "living room"  # TWX
    assert room_of(Observation(look="You are in the kitchen.", text="You are in the pantry.")) == "kitchen"
    assert room_of(Observation(text="You take the knife.")) == ""  # says nothing: no room


def test_a_compass_move_is_undone_by_the_opposite_one() -> None:
    assert way_back("move east") == "move west"
    assert way_back("go northeast") == "go southwest"
    assert way_back("take the knife") == ""
    assert way_back("north or south") == ""  # two directions: not one move


def test_a_move_that_names_a_known_room_leads_there_as_the_moves_seen_did() -> None:
    rooms = RoomMap()
    rooms.learn("greenhouse", "go to outside", "outside")
    rooms.learn("hallway", "go to kitchen", "kitchen")
    assert rooms.destination("outside", "go to greenhouse") == "greenhouse"  # never walked, named as "go to" names
    assert rooms.destination("greenhouse", "go to kitchen") == "kitchen"  # no door seen, but a known room
    assert rooms.destination("outside", "focus on greenhouse") == ""  # not a move: no move was phrased so
    assert rooms.destination("outside", "go to bathroom") == ""  # a room the episode has not seen
    assert rooms.copy().destination("outside", "go to greenhouse") == "greenhouse"  # a copy knows what it knew
    compass = RoomMap()
    compass.learn("kitchen", "go east", "pantry")
    assert compass.destination("pantry", "go west") == "kitchen"  # the way back, as learned
    assert compass.destination("pantry", "go north") == ""  # compass moves name no room


def test_the_first_step_of_each_shortest_known_walk_names_the_rooms_it_leads_to() -> None:
    rooms = RoomMap()
    rooms.learn("kitchen", "move east", "corridor")
    rooms.learn("corridor", "move east", "backyard")
    rooms.learn("corridor", "open door", "corridor")  # no room change: not an exit
    rooms.learn("", "move north", "pantry")  # a room not known: nothing learned
    # In the backyard only the way back was learned (the reverse of `move east`), yet it leads two rooms away.
    assert rooms.leads("backyard", ["move west", "take shovel"]) == [("corridor", "kitchen"), ()]
    assert rooms.leads("kitchen", ["move east", "move west"]) == [("corridor", "backyard"), ()]
    assert rooms.leads("attic", ["move down"]) == [()]
    # A step seen later overrides the assumed way back: the corridor's west door turned out to lead elsewhere.
    rooms.learn("corridor", "move west", "cellar")
    assert rooms.leads("corridor", ["move west", "move east"]) == [("cellar",), ("backyard",)]
    copied = rooms.copy()
    copied.learn("cellar", "move down", "crypt")
    assert "crypt" not in rooms.exits and "move down" not in rooms.exits["cellar"]  # a copy's steps stay its own


def test_the_candidate_text_carries_the_mark_only_where_rooms_are_known() -> None:
    # The reader takes the seen mark off the end as a feature and reads the rooms as the candidate's words.
    ids, seen = TokenFeaturizer("hash").candidate(candidate_text("move west", True, ("kitchen",)))
    assert seen and len(ids) == len(TokenFeaturizer("hash").candidate("move west (leads to kitchen)")[0])
    assert candidate_text("move west", False) == "move west"
    assert candidate_text("move west", True, ("kitchen",)) == "move west" + leads_mark(["kitchen"]) + SEEN_MARK
    assert leads_mark(["kitchen", "pantry"]) == " (leads to kitchen, pantry)"


def test_training_examples_mark_the_way_back_as_the_planner_does() -> None:
    steps = [make_step("cook", "You are in the kitchen.", ["move east", "take knife"], 0, visits=[1, 1]),
             make_step("cook", "You are in the corridor.", ["move west", "move east"], 0, visits=[1, 1]),
             make_step("cook", "You are in the kitchen.", ["move east", "take knife"], 1, visits=[1, 1])]
    first, second, third = episode_examples(make_episode("e", steps))
    assert first.leads == ((), ())  # nothing walked yet
    assert second.leads == (("kitchen",), ())  # the way back, before it was walked
    assert third.leads == (("corridor",), ())
    assert [text for text, _ in second.candidates(rooms=True)] == ["move west (leads to kitchen)", "move east"]
    assert [text for text, _ in second.candidates()] == ["move west", "move east"]  # a θ trained without marks


def test_search_walks_its_paths_steps_into_the_map(coin: EnvHost) -> None:
    # CoinCollector's test game 0 starts in the kitchen; west is the living room.
    env = SearchModel(coin.simulate, Scorer(RewardSettings()), SearchConfig(revisit_penalty=0.0))
    env.root()
    env.step((), env.actions(()).index("move west"))
    texts, _ = env.candidates(("move west",), rooms=True)
    assert candidate_text("move east", True, ("kitchen",)) in texts  # been there, and it is the kitchen
    assert all("leads to" not in t for t in env.candidates(("move west",))[0])
    assert env.rooms.exits == {}  # search's own walks never reach the episode's map


def test_a_theta_saved_before_the_marks_is_served_without_them() -> None:
    assert NetConfig.from_dict({"feature_dim": 8, "hidden": 16}).room_marks is False


def test_search_reads_the_episodes_last_actions_then_the_paths_own(coin: EnvHost) -> None:
    env = SearchModel(coin.simulate, Scorer(RewardSettings()), SearchConfig(), taken=("open door", "move east"))
    assert env.recent_at(("move west",), 2) == ("move east", "move west")
    assert env.recent_at(("move west",), 0) == ()


def test_search_reads_the_episodes_scoring_actions_then_the_paths_own(coin: EnvHost) -> None:
    env = SearchModel(coin.simulate, Scorer(RewardSettings()), SearchConfig(), scored=("open door to west",))
    env.root()
    env.step((), env.actions(()).index("move west"))  # test game 0: west of the kitchen is the living room
    assert env.scored_at(()) == ("open door to west",)
    assert env.scored_at(("move west",)) == ("open door to west",)  # a move scores nothing in CoinCollector
    texts, _ = env.candidates(("move west",), scored=True)
    assert texts == ["move east (been there)", "open door to west (scored before)"]  # a kind that scored
    assert all("scored" not in t for t in env.candidates(("move west",))[0])  # a θ trained without the marks
    env.nodes[("move west",)].observation.score = env.nodes[()].observation.score + 1
    assert env.scored_at(("move west",)) == ("open door to west", "move west")
