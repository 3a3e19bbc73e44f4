"""ScienceWorld's listed actions with each object called as the room shows it (envs/scienceworld_names.py), on the
referents a real identify-life-stages world gives (a dove egg listed as "dove", a frog egg as "common toad")."""

from __future__ import annotations

from evoskill.envs.scienceworld_names import renamed_actions, shown_name, unique_referents

REFERENTS = {
    "1": ["dove egg", "egg dove egg", "living thing", "egg dove", "organism", "dove"],
    "2": ["egg common toad", "living thing", "frog egg", "egg frog egg", "organism", "common toad"],
    "3": ["moth", "living thing", "egg butterfly egg", "egg moth", "organism", "butterfly egg"],
    "4": ["living thing", "egg butterfly egg", "butterfly", "organism", "egg butterfly", "butterfly egg"],
    "5": ["outside"],
}
LISTED = {"1": "dove", "2": "common toad", "3": "egg moth", "4": "butterfly", "5": "outside"}
TEMPLATES = {11: "focus on OBJ", 7: "move OBJ to OBJ", 24: "task"}
ROOM = "This outside location is called the outside. Here you see:\n\ta dove egg\n\ta frog egg\n\ta butterfly egg\n" \
       "\ta butterfly egg"


def listing(*entries: tuple[int, list[str]]) -> list[dict[str, object]]:
    text = {i: t for i, t in TEMPLATES.items()}
    out = []
    for template, oids in entries:
        action = text[template]
        for oid in oids:
            action = action.replace("OBJ", LISTED[oid], 1)
        out.append({"action": action, "template_id": template, "obj_ids": [int(o) for o in oids]})
    return out


def test_a_referent_two_objects_share_is_nobodys_name() -> None:
    own = unique_referents(REFERENTS)
    assert "butterfly egg" not in own["3"] and "butterfly egg" not in own["4"] and "organism" not in own["1"]
    assert own["1"] == ["dove egg", "egg dove egg", "egg dove", "dove"]


def test_the_longest_name_the_room_shows_as_words_is_taken() -> None:
    own = unique_referents(REFERENTS)
    assert shown_name(own["1"], ROOM.lower()) == "dove egg"
    assert shown_name(own["2"], ROOM.lower()) == "frog egg"
    assert shown_name(own["3"], ROOM.lower()) is None  # "moth" and "egg moth" appear nowhere
    assert shown_name(["dove"], "a doves' nest") is None  # words, not parts of words


def test_objects_are_renamed_in_every_slot_and_the_rest_stays_as_listed() -> None:
    valid = listing((11, ["1"]), (11, ["2"]), (11, ["3"]), (7, ["1", "5"]), (24, []))
    assert renamed_actions(valid, TEMPLATES, LISTED, REFERENTS, ROOM) == [
        "focus on dove egg", "focus on frog egg", "focus on egg moth", "move dove egg to outside", "task"]


def test_an_action_its_template_does_not_give_back_is_kept_as_listed() -> None:
    odd = [{"action": "focus on the dove", "template_id": 11, "obj_ids": [1]},
           {"action": "focus on dove", "template_id": 99, "obj_ids": [1]}]
    assert renamed_actions(odd, TEMPLATES, LISTED, REFERENTS, ROOM) == ["focus on the dove", "focus on dove"]
