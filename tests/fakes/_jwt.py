"""JSON Web Tokens as the push vendors check them (RFC 7519 over RFC 7515's compact form):
the fakes' own code, independent of noti's signer, so a test of one checks the other.

:func:`verify` splits a compact JWS, decodes its header and claims and checks its signature
with a public key: ``RS256`` (RSASSA-PKCS1-v1_5 with SHA-256, what Google's OAuth 2.0 token
endpoint takes from a service account) or ``ES256`` (ECDSA P-256 with SHA-256, the signature
being the 64 bytes ``r || s``, what APNs takes). :func:`sign` builds one, for the tests that
hand a fake tokens of their own (tampered ones too).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature

__all__ = ["BadToken", "Decoded", "b64url", "b64url_decode", "sign", "verify"]


class BadToken(Exception):
    """The token is malformed or its signature does not verify (the message says which)."""


@dataclass(frozen=True, slots=True)
class Decoded:
    header: dict[str, Any]
    claims: dict[str, Any]


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(text: str) -> bytes:
    if not text or any(
        c not in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_" for c in text
    ):
        raise BadToken("not base64url")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise BadToken("not base64url") from exc


def _json_part(text: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(b64url_decode(text))
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadToken(f"the {what} is not JSON") from exc
    if not isinstance(value, dict):
        raise BadToken(f"the {what} is not a JSON object")
    return value


def decode(token: str) -> tuple[Decoded, bytes, bytes]:
    """The header and claims, the signing input and the signature; nothing verified yet."""
    parts = token.split(".")
    if len(parts) != 3:
        raise BadToken("not three dot-separated parts")
    header, claims = _json_part(parts[0], "header"), _json_part(parts[1], "claims")
    return Decoded(header, claims), f"{parts[0]}.{parts[1]}".encode(), b64url_decode(parts[2])


def verify(token: str, key: rsa.RSAPublicKey | ec.EllipticCurvePublicKey, alg: str) -> Decoded:
    """The token's header and claims once its signature verifies with ``key`` under ``alg``.

    Raises:
        BadToken: malformed, another ``alg`` in its header, or a signature that does not verify.
    """
    decoded, signing_input, signature = decode(token)
    if decoded.header.get("alg") != alg:
        raise BadToken(f"alg is {decoded.header.get('alg')!r}, not {alg}")
    try:
        if alg == "RS256" and isinstance(key, rsa.RSAPublicKey):
            key.verify(signature, signing_input, padding.PKCS1v15(), hashes.SHA256())
        elif alg == "ES256" and isinstance(key, ec.EllipticCurvePublicKey):
            if len(signature) != 64:
                raise BadToken("an ES256 signature is 64 bytes (r || s)")
            r, s = int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big")
            key.verify(encode_dss_signature(r, s), signing_input, ec.ECDSA(hashes.SHA256()))
        else:
            raise BadToken(f"no {alg} key")
    except InvalidSignature as exc:
        raise BadToken("the signature does not verify") from exc
    return decoded


def sign(
    header: dict[str, Any], claims: dict[str, Any], key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
) -> str:
    """A compact JWS of ``header`` and ``claims`` signed with ``key`` (RS256 or ES256, by the
    key's type; ``header["alg"]`` is written as given, so a test can lie about it)."""
    signing_input = (
        b64url(json.dumps(header, separators=(",", ":")).encode())
        + "."
        + b64url(json.dumps(claims, separators=(",", ":")).encode())
    )
    if isinstance(key, rsa.RSAPrivateKey):
        signature = key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    else:
        r, s = decode_dss_signature(key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
        signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    return f"{signing_input}.{b64url(signature)}"
