"""ScienceWorld's listed actions with each object called as the observation shows it (`sciworld:TASK?shown_names=1`).

ScienceWorld names an object in its listed actions by the first of its referents no other object shares, in an
order of its own: a dove egg, whose room reads "a dove egg", is listed as "focus on dove", a frog egg as "focus
on common toad", a hatchling tortoise as "focus on giant tortoise". A reader matching the goal ("the life stages
of the dove") and the room against the candidates is misled by those names. Here each object is called instead by
the longest of its referents that no other object in the world has and that the room or the inventory shows as
words; an object with none keeps ScienceWorld's name. ScienceWorld's parser resolves any referent
an object alone has, so the renamed action acts on the same object.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

SLOT = "OBJ"  # an object's place in ScienceWorld's action templates


def unique_referents(referents: Mapping[str, Iterable[str]]) -> dict[str, list[str]]:
    """Per object id, its referents no other object has (ScienceWorld's `getAllObjectIdsTypesReferentsLUTJSON`:
    every object of the world, so a name stays one object's wherever the agent goes)."""
    owners: dict[str, set[str]] = {}
    for oid, names in referents.items():
        for name in set(names):
            owners.setdefault(name, set()).add(oid)
    return {oid: [n for n in dict.fromkeys(names) if len(owners[n]) == 1] for oid, names in referents.items()}


def shown_name(own: Sequence[str], shown: str) -> str | None:
    """The longest of `own` (an object's unique referents) that `shown` (the room and the inventory, lower case)
    contains as whole words; None where none is shown."""
    found = [n for n in own if n and re.search(rf"(?<![\w-]){re.escape(n.lower())}(?![\w-])", shown)]
    return max(found, key=lambda n: (len(n), n)) if found else None


def renamed_actions(valid: Sequence[Mapping[str, Any]], templates: Mapping[int, str], listed: Mapping[str, str],
                    referents: Mapping[str, Iterable[str]], shown: str) -> list[str]:
    """The listed actions (`getValidActionObjectCombinationsJSON`'s: action, template_id, obj_ids), each object in
    them called by its shown name (`shown_name`) where it has one. `templates` maps a template id to its text
    ("focus on OBJ"), `listed` an object id to ScienceWorld's name for it. An action whose template filled with
    ScienceWorld's names does not give back its listed text is kept as listed."""
    own = unique_referents(referents)
    shown = shown.lower()
    names: dict[str, str] = {}
    out = []
    for entry in valid:
        action = str(entry["action"])
        template = templates.get(int(entry["template_id"]), "")
        oids = [str(o) for o in entry.get("obj_ids", [])]
        as_listed = [listed.get(o, "") for o in oids]
        if not oids or template.count(SLOT) != len(oids) or _filled(template, as_listed) != action:
            out.append(action)
            continue
        for oid in oids:
            if oid not in names:
                names[oid] = shown_name(own.get(oid, []), shown) or listed.get(oid, "")
        out.append(_filled(template, [names[o] for o in oids]))
    return out


def _filled(template: str, names: Sequence[str]) -> str:
    parts = template.split(SLOT)
    return "".join(p + n for p, n in zip(parts, [*names, ""], strict=True))
