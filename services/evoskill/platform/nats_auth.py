"""Who may do what on the bus: one NATS user per service, named after it, allowed to publish what it publishes
and the dead letters of what it consumes, to subscribe to what it consumes and its own inboxes (`bus.ROUTES`),
and to use JetStream's API, acks and flow control. A service that publishes may also write the object store
its large events travel through. `authorization()` is the nats-server configuration block: the embedded stack's,
or one for an external server (`evoskill nats-auth`). Passwords in it are `$EVOSKILL_NATS_PASSWORD_<USER>`
references the server reads from its own environment, so no file holds one.
"""

from __future__ import annotations

import json

from evoskill.core.errors import InvalidInput
from evoskill.platform.bus import ROUTES, Subjects
from evoskill.platform.config import SERVICES
from evoskill.platform.payloads import payload_bucket

SUPERVISOR = "supervisor"  # the embedded stack's own user: it reads JetStream's state and publishes nothing
USERS = (*SERVICES, SUPERVISOR)
JETSTREAM = ("$JS.API.>", "$JS.ACK.>", "$JS.FC.>")  # the API, acks of pulled messages, flow control of reads
INBOXES = "_INBOX.>"  # replies of the API and pulled messages arrive there


def password_variable(user: str) -> str:
    """The environment variable that holds `user`'s password, for the server and, in the stack, its service."""
    return f"EVOSKILL_NATS_PASSWORD_{user.upper()}"


def permissions(user: str, prefix: str, stream: str) -> dict[str, dict[str, list[str]]]:
    """`user`'s publish and subscribe allow-lists (NATS permissions) on a bus of `prefix` and `stream`."""
    if user == SUPERVISOR:
        return {"publish": {"allow": ["$JS.API.INFO", "$JS.API.STREAM.INFO.>"]}, "subscribe": {"allow": [INBOXES]}}
    if user not in ROUTES:
        raise InvalidInput(f"no NATS user {user!r}; expected one of {', '.join(USERS)}")
    route = ROUTES[user]
    publish = [f"{prefix}.{name}" for name in route.publishes]
    publish += [f"{prefix}.{Subjects.DLQ}.{name}" for name in route.consumes]
    if route.publishes:  # an event over the server's max_payload goes through the object store
        publish.append(f"$O.{payload_bucket(stream)}.>")
    subscribe = [f"{prefix}.{name}" for name in route.consumes]
    return {"publish": {"allow": [*publish, *JETSTREAM]}, "subscribe": {"allow": [*subscribe, INBOXES]}}


def authorization(prefix: str, stream: str, users: tuple[str, ...] = USERS) -> str:
    """The nats-server `authorization` block of `users` (JSON values are valid NATS configuration)."""
    entries = [f"    {{user: {json.dumps(user)}, password: ${password_variable(user)}, "
               f"permissions: {json.dumps(permissions(user, prefix, stream))}}}" for user in users]
    return "authorization {\n  users = [\n" + "\n".join(entries) + "\n  ]\n}\n"
