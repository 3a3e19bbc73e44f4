"""TLS for NATS and gRPC from `TlsSettings` (PEM paths): a client's ssl context, gRPC channel and server
credentials. Files are read when a connection or server is made, so a renewed certificate is taken up by the
next restart; a missing or unreadable file is an InvalidInput naming the setting."""

from __future__ import annotations

import ssl
from pathlib import Path

import grpc

from evoskill.core.errors import InvalidInput
from evoskill.platform.config import TlsSettings


def _read(path: Path | None, setting: str) -> bytes | None:
    if path is None:
        return None
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InvalidInput(f"{setting} {path}: {exc.strerror or exc}") from None


def client_context(tls: TlsSettings, group: str = "nats") -> ssl.SSLContext | None:
    """What a client verifies its server with (and presents, where it has a certificate); None: no TLS."""
    if not tls.enabled:
        return None
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    if (ca := _read(tls.ca, f"{group}.tls.ca")) is not None:
        context.load_verify_locations(cadata=ca.decode())
    if tls.cert is not None:
        _read(tls.cert, f"{group}.tls.cert"), _read(tls.key, f"{group}.tls.key")  # a clear error, not ssl's
        context.load_cert_chain(str(tls.cert), str(tls.key))
    return context


def channel_credentials(tls: TlsSettings) -> grpc.ChannelCredentials:
    return grpc.ssl_channel_credentials(root_certificates=_read(tls.ca, "grpc.tls.ca"),
                                        private_key=_read(tls.key, "grpc.tls.key"),
                                        certificate_chain=_read(tls.cert, "grpc.tls.cert"))


def server_credentials(tls: TlsSettings) -> grpc.ServerCredentials:
    if tls.cert is None or tls.key is None:
        raise InvalidInput("grpc.tls: a TLS server needs cert and key (ca alone only makes clients verify)")
    key, cert = _read(tls.key, "grpc.tls.key"), _read(tls.cert, "grpc.tls.cert")
    assert key is not None and cert is not None
    return grpc.ssl_server_credentials([(key, cert)], root_certificates=_read(tls.ca, "grpc.tls.ca"),
                                       require_client_auth=tls.client_auth)
