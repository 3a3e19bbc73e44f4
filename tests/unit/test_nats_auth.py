"""NATS users and their permissions, derived from what each service publishes and consumes (`bus.ROUTES`), the
embedded server's configuration file, and settings persisted without their secrets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from evoskill.core.errors import InvalidInput, PermissionDenied
from evoskill.events.v1 import events_pb2
from evoskill.platform.bus import ROUTES, Bus, Subjects
from evoskill.platform.config import SERVICES, NatsSettings, QdrantSettings, Settings, TlsSettings, without_secrets
from evoskill.platform.nats_auth import USERS, authorization, permissions
from evoskill.stack.natsconf import configure


def test_each_service_may_publish_its_subjects_and_the_dead_letters_of_what_it_consumes() -> None:
    reward = permissions("reward", "evoskill", "EVOSKILL")
    assert reward["publish"]["allow"] == ["evoskill.reward.scored", "evoskill.dlq.step.executed",
                                          "$O.EVOSKILL-payloads.>", "$JS.API.>", "$JS.ACK.>", "$JS.FC.>"]
    assert reward["subscribe"]["allow"] == ["evoskill.step.executed", "_INBOX.>"]
    memory = permissions("memory", "evoskill", "EVOSKILL")  # publishes nothing: no object store either
    assert not any(s.startswith(("evoskill.reward", "evoskill.episode", "$O.")) for s in memory["publish"]["allow"])
    assert permissions("supervisor", "evoskill", "EVOSKILL")["publish"]["allow"] == [
        "$JS.API.INFO", "$JS.API.STREAM.INFO.>"]
    with pytest.raises(InvalidInput, match="no NATS user 'admin'"):
        permissions("admin", "evoskill", "EVOSKILL")


def test_every_subject_is_published_by_someone_it_is_consumed_from() -> None:
    assert set(ROUTES) == set(SERVICES)
    published = {name for route in ROUTES.values() for name in route.publishes}
    consumed = {name for route in ROUTES.values() for name in route.consumes}
    assert consumed <= published
    assert published | consumed <= {v for k, v in vars(Subjects).items() if k.isupper()}


async def test_a_service_bus_refuses_what_its_user_may_not_do() -> None:
    bus = Bus(Settings(), "reward")
    with pytest.raises(PermissionDenied, match=r"reward does not publish policy\.published"):
        await bus.publish(Subjects.POLICY_PUBLISHED, events_pb2.PolicyPublished(version="v000001"))
    with pytest.raises(PermissionDenied, match=r"reward does not consume episode\.completed"):
        bus.consumer(Subjects.EPISODE_COMPLETED, events_pb2.EpisodeCompleted)


def test_the_embedded_server_configuration_names_passwords_and_holds_none(tmp_path: Path) -> None:
    nats = configure(Settings(state_dir=tmp_path), tmp_path)
    assert nats.config is not None and nats.config.stat().st_mode & 0o777 == 0o600
    text = nats.config.read_text()
    assert text == authorization("evoskill", "EVOSKILL")
    assert set(nats.passwords) == set(USERS)
    for user, password in nats.passwords.items():
        assert password not in text and password[0].isalpha()  # nats-server would read digits as a number
        assert f"password: $EVOSKILL_NATS_PASSWORD_{user.upper()}," in text
        assert nats.server_env()[f"EVOSKILL_NATS_PASSWORD_{user.upper()}"] == password
    assert nats.user_env("planner") == {"EVOSKILL_NATS__USER": "planner",
                                        "EVOSKILL_NATS__PASSWORD": nats.passwords["planner"]}
    assert configure(Settings(state_dir=tmp_path), tmp_path).passwords != nats.passwords  # new at each start

    off = Settings(state_dir=tmp_path, nats=NatsSettings(auth=False))
    assert configure(off, tmp_path).config is None and configure(off, tmp_path).user_env("planner") == {}
    only_ca = Settings(state_dir=tmp_path, nats=NatsSettings(tls=TlsSettings(ca=tmp_path / "ca.pem")))
    with pytest.raises(InvalidInput, match="embedded nats-server needs cert and key"):
        configure(only_ca, tmp_path)


def test_tls_settings_that_cannot_work_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="cert and key go together"):
        TlsSettings(cert=tmp_path / "cert.pem")
    with pytest.raises(ValidationError, match="client_auth needs ca"):
        TlsSettings(cert=tmp_path / "c", key=tmp_path / "k", client_auth=True)
    assert not TlsSettings().enabled and TlsSettings(ca=tmp_path / "ca.pem").enabled


def test_secrets_are_left_out_of_persisted_settings_and_passed_as_variables() -> None:
    settings = Settings(nats=NatsSettings(user="planner", password=SecretStr("nats-pw")),
                        qdrant=QdrantSettings(url="https://q.example", api_key=SecretStr("q-key")))
    data, env = without_secrets(settings)
    assert env == {"EVOSKILL_NATS__PASSWORD": "nats-pw", "EVOSKILL_QDRANT__API_KEY": "q-key"}
    text = json.dumps(data)
    assert "nats-pw" not in text and "q-key" not in text and "*****" not in text
    assert data["nats"]["user"] == "planner" and "password" not in data["nats"]
    assert Settings.model_validate(data).qdrant.api_key.get_secret_value() == ""  # as a child reads the file
    assert without_secrets(Settings())[1] == {}  # unset secrets are not passed at all
