"""The embedded nats-server's configuration: a user per service with its permissions (`platform.nats_auth`) and a
password generated at each start when `nats.auth` is on, TLS when `nats.tls` is set. The file (`<state>/nats.conf`,
0600) names each password by a variable, never holds one: the passwords reach the server, and each its own
service, through the process environment, which only this user can read."""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import SecretStr

from evoskill.core.errors import InvalidInput
from evoskill.platform.config import NatsSettings, Settings, TlsSettings
from evoskill.platform.nats_auth import SUPERVISOR, USERS, authorization, password_variable

CONFIG_FILE = "nats.conf"


def write_private(path: Path, text: str) -> None:
    """Write `text` to `path` readable and writable by this user alone (0600), whatever mode it had."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)


@dataclass(frozen=True)
class EmbeddedNats:
    """What the stack's nats-server was configured with, and what each of its clients connects with."""

    nats: NatsSettings
    config: Path | None = None  # None: neither users nor TLS, no file
    passwords: dict[str, str] = field(default_factory=dict, repr=False)  # user -> password; empty: no auth

    def server_env(self) -> dict[str, str]:
        """The variables the configuration file names."""
        return {password_variable(user): password for user, password in self.passwords.items()}

    def user_env(self, user: str) -> dict[str, str]:
        """The settings, as environment variables, that make a process connect as `user`."""
        if not self.passwords:
            return {}
        return {"EVOSKILL_NATS__USER": user, "EVOSKILL_NATS__PASSWORD": self.passwords[user]}

    def settings_for(self, user: str = SUPERVISOR) -> NatsSettings:
        """`nats` settings that connect as `user` (the supervisor's own by default)."""
        if not self.passwords:
            return self.nats
        return self.nats.model_copy(update={"user": user, "password": SecretStr(self.passwords[user])})


def _tls_block(tls: TlsSettings) -> str:
    if tls.cert is None or tls.key is None:
        raise InvalidInput("nats.tls: the embedded nats-server needs cert and key to serve TLS")
    block: dict[str, object] = {"cert_file": str(tls.cert.resolve()), "key_file": str(tls.key.resolve())}
    if tls.client_auth and tls.ca is not None:
        block.update(ca_file=str(tls.ca.resolve()), verify=True)
    return f"tls {json.dumps(block)}\n"


def configure(settings: Settings, state_dir: Path) -> EmbeddedNats:
    """Write the configuration of the embedded nats-server `settings` ask for, with new passwords."""
    nats = settings.nats
    blocks: list[str] = []
    passwords: dict[str, str] = {}
    if nats.auth:
        # A leading letter: nats-server reads a variable's value as configuration, and digits alone as a number.
        passwords = {user: "p" + secrets.token_hex(24) for user in USERS}
        blocks.append(authorization(nats.subject_prefix, nats.stream))
    if nats.tls.enabled:
        blocks.append(_tls_block(nats.tls))
    if not blocks:
        return EmbeddedNats(nats)
    path = state_dir / CONFIG_FILE
    write_private(path, "".join(blocks))
    return EmbeddedNats(nats, path, passwords)
