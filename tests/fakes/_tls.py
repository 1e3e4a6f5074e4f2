"""Certificates for the fakes: a test certificate authority and a server certificate it signs
for ``127.0.0.1`` and ``localhost`` (:func:`make_tls`), so that a client verifies a fake that
speaks TLS (APNs over HTTP/2, SMTP with STARTTLS or TLS) with ``ca_file`` as it verifies the
vendor; and the one builder of every certificate a fake makes (:func:`certificate`; SNS signs
with a self-signed one)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["Tls", "certificate", "common_name", "make_tls", "pem_key"]


@dataclass(frozen=True, slots=True)
class Tls:
    """PEM files: a test CA, and a server certificate and key it signed."""

    ca_file: str
    cert_file: str
    key_file: str


def common_name(text: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, text)])


def pem_key(key: Any) -> bytes:
    """``key`` (a private key) as unencrypted PKCS#8 PEM."""
    return bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )


def certificate(
    subject: x509.Name,
    public_key: Any,
    *,
    issuer: x509.Name | None = None,
    signing_key: Any,
    days: float = 1,
    extensions: tuple[tuple[x509.ExtensionType, bool], ...] = (),
) -> x509.Certificate:
    """A certificate of ``subject``'s ``public_key``, signed by ``signing_key`` in the name of
    ``issuer`` (the subject itself: self-signed), valid from five minutes ago for ``days``,
    with ``extensions`` (each with whether it is critical)."""
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer or subject)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
    )
    for extension, critical in extensions:
        builder = builder.add_extension(extension, critical=critical)
    return builder.sign(signing_key, hashes.SHA256())


def make_tls(directory: Path, *, name_prefix: str = "noti test") -> Tls:
    """A new CA (``<name_prefix> CA``) and a server certificate for 127.0.0.1 and localhost
    signed by it, written to ``directory`` (the CA's certificate is what a client trusts)."""
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = common_name(f"{name_prefix} CA")
    ca = certificate(
        ca_name,
        ca_key.public_key(),
        signing_key=ca_key,
        extensions=(
            (x509.BasicConstraints(ca=True, path_length=0), True),
            (x509.KeyUsage(True, False, False, False, False, True, True, False, False), True),
            (x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False),
        ),
    )
    key = ec.generate_private_key(ec.SECP256R1())
    addresses = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
    server = certificate(
        common_name("127.0.0.1"),
        key.public_key(),
        issuer=ca_name,
        signing_key=ca_key,
        extensions=(
            (x509.SubjectAlternativeName(addresses), False),
            (x509.BasicConstraints(ca=False, path_length=None), True),
            (x509.KeyUsage(True, False, False, False, False, False, False, False, False), True),
            (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False),
            (x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False),
            (x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False),
        ),
    )
    directory.mkdir(parents=True, exist_ok=True)
    tls = Tls(str(directory / "ca.pem"), str(directory / "server.pem"), str(directory / "server-key.pem"))
    Path(tls.ca_file).write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    Path(tls.cert_file).write_bytes(server.public_bytes(serialization.Encoding.PEM))
    Path(tls.key_file).write_bytes(pem_key(key))
    return tls
