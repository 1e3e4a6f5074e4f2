"""JSON Web Tokens the push providers sign (RFC 7519 in RFC 7515's compact form): ``RS256``
assertions for Google's OAuth 2.0 token endpoint (FCM) and ``ES256`` provider tokens for APNs.

Signing needs the ``cryptography`` package (the ``push`` extra); a missing package is an
:class:`~noti.errors.InvalidConfig` naming the extra, raised when a provider is configured.
An ES256 signature is the 64 bytes ``r || s`` (RFC 7518 §3.4), not the DER the library
returns: the classic interoperability mistake, pinned by RFC 7515's own vectors in the tests.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from noti.errors import InvalidConfig

__all__ = [
    "EXTRA_HINT",
    "SigningKey",
    "b64url",
    "es256_key",
    "require_crypto",
    "rs256_key",
    "sign_jwt",
    "signature",
]

EXTRA_HINT = "install the push extra: pip install 'noti[push]'"

try:
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
except ImportError:  # pragma: no cover - the extra is installed wherever tests run
    _crypto = False
else:
    _crypto = True

SigningKey = Any  # rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey (cryptography may be absent)


def require_crypto(what: str) -> None:
    """Raises InvalidConfig: ``cryptography`` is not installed (``what`` needs it)."""
    if not _crypto:
        raise InvalidConfig(f"{what} signs JSON Web Tokens with the cryptography package: {EXTRA_HINT}")


def b64url(data: bytes) -> str:
    """Base64url without padding (RFC 7515 §2)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _load_pem(pem: str, what: str) -> Any:
    require_crypto(what)
    try:
        return serialization.load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError) as exc:  # the library's text never quotes the key
        raise InvalidConfig(f"{what}: not an unencrypted PEM private key ({type(exc).__name__})") from None


def rs256_key(pem: str, what: str) -> SigningKey:
    """An RSA private key (a Google service account's ``private_key``) from PEM.

    Raises:
        InvalidConfig: not an unencrypted PEM RSA key of at least 2,048 bits.
    """
    key = _load_pem(pem, what)
    if not isinstance(key, rsa.RSAPrivateKey) or key.key_size < 2048:
        raise InvalidConfig(f"{what}: an RSA private key of at least 2048 bits is needed")
    return key


def es256_key(pem: str, what: str) -> SigningKey:
    """A P-256 private key (an APNs ``.p8`` authentication key) from PEM.

    Raises:
        InvalidConfig: not an unencrypted PEM key on the P-256 curve.
    """
    key = _load_pem(pem, what)
    if not isinstance(key, ec.EllipticCurvePrivateKey) or not isinstance(key.curve, ec.SECP256R1):
        raise InvalidConfig(f"{what}: an elliptic-curve P-256 private key (an APNs .p8 key) is needed")
    return key


def signature(key: SigningKey, signing_input: bytes) -> bytes:
    """The JWS signature of ``signing_input``: RS256 for an RSA key (deterministic), ES256
    (``r || s``, 32 bytes each) for a P-256 key."""
    if isinstance(key, rsa.RSAPrivateKey):
        return key.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
    r, s = decode_dss_signature(key.sign(signing_input, ec.ECDSA(hashes.SHA256())))
    return r.to_bytes(32, "big") + s.to_bytes(32, "big")


def sign_jwt(header: dict[str, Any], claims: dict[str, Any], key: SigningKey) -> str:
    """The compact JWS ``header.claims.signature`` (each part base64url of compact JSON)."""
    head = b64url(json.dumps(header, separators=(",", ":")).encode())
    body = b64url(json.dumps(claims, separators=(",", ":")).encode())
    signing_input = f"{head}.{body}".encode("ascii")
    return f"{head}.{body}.{b64url(signature(key, signing_input))}"
