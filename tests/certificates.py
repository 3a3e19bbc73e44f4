"""Certificates made for a test: a CA and one certificate it signs for 127.0.0.1 and localhost, good for a server
and for a client (mutual TLS). With the `cryptography` package where it is installed, else the `openssl` CLI."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from ipaddress import ip_address
from pathlib import Path

import pytest


@dataclass(frozen=True)
class Certificates:
    ca: Path
    cert: Path
    key: Path


def make_certificates(folder: Path) -> Certificates:
    folder.mkdir(parents=True, exist_ok=True)
    made = Certificates(folder / "ca.pem", folder / "cert.pem", folder / "key.pem")
    try:
        import cryptography  # noqa: F401
    except ImportError:
        _with_openssl(made)
    else:
        _with_cryptography(made)
    made.key.chmod(0o600)
    return made


def _with_cryptography(made: Certificates) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    def name(common: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])

    now = datetime.now(UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_id = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())

    def signed(subject: str, public: ec.EllipticCurvePublicKey, extensions: list[tuple[x509.ExtensionType, bool]]
               ) -> x509.Certificate:
        builder = (x509.CertificateBuilder().subject_name(name(subject)).issuer_name(name("evoskill test CA"))
                   .public_key(public).serial_number(x509.random_serial_number())
                   .not_valid_before(now - timedelta(minutes=5)).not_valid_after(now + timedelta(days=1))
                   .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_id), False)
                   .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), False))
        for extension, critical in extensions:
            builder = builder.add_extension(extension, critical)
        return builder.sign(ca_key, hashes.SHA256())

    no_usage = dict.fromkeys(("content_commitment", "key_encipherment", "data_encipherment", "key_agreement",
                              "encipher_only", "decipher_only"), False)
    ca = signed("evoskill test CA", ca_key.public_key(), [
        (x509.BasicConstraints(ca=True, path_length=0), True),
        (x509.KeyUsage(digital_signature=False, key_cert_sign=True, crl_sign=True, **no_usage), True),
    ])
    leaf = signed("127.0.0.1", key.public_key(), [
        (x509.BasicConstraints(ca=False, path_length=None), True),
        (x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ip_address("127.0.0.1"))]), False),
        (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), False),
    ])
    made.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    made.cert.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    made.key.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))


def _with_openssl(made: Certificates) -> None:
    if shutil.which("openssl") is None:
        pytest.fail("making test certificates needs the cryptography package or the openssl CLI")
    folder, ca_key, request = made.ca.parent, made.ca.with_suffix(".key"), made.cert.with_suffix(".csr")
    extensions = folder / "leaf.ext"
    extensions.write_text("basicConstraints=critical,CA:FALSE\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n"
                          "extendedKeyUsage=serverAuth,clientAuth\n")
    curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    for argv in (
        ["req", "-x509", *curve, "-keyout", ca_key, "-out", made.ca, "-days", "1", "-subj", "/CN=evoskill test CA",
         "-addext", "basicConstraints=critical,CA:TRUE,pathlen:0", "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
        ["req", *curve, "-keyout", made.key, "-out", request, "-subj", "/CN=127.0.0.1"],
        ["x509", "-req", "-in", request, "-CA", made.ca, "-CAkey", ca_key, "-CAcreateserial", "-out", made.cert,
         "-days", "1", "-extfile", extensions],
    ):
        subprocess.run(["openssl", *map(str, argv)], check=True, capture_output=True)
