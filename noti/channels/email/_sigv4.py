"""AWS Signature Version 4: the ``Authorization`` header AWS APIs (SES among them) check.

noti signs its own requests rather than depend on botocore for one API call. The algorithm,
step by step as AWS documents it ("Create a signed AWS API request"):

1. the **canonical request**: the method; the path, each segment URI-encoded (RFC 3986
   unreserved characters kept; a path already percent-encoded is encoded once more, as AWS
   asks of every service but S3); the query, each name and value URI-encoded, sorted by name
   then value; the headers signed, names in lower case, values trimmed with inner runs of
   white space made one space, sorted, each ``name:value`` and a newline; the signed header
   names joined by ``;``; the hex SHA-256 of the body;
2. the **string to sign**: ``AWS4-HMAC-SHA256``, the ``x-amz-date`` (``YYYYMMDDTHHMMSSZ``),
   the credential scope ``<date>/<region>/<service>/aws4_request``, the hex SHA-256 of the
   canonical request, one a line;
3. the **signing key**: HMAC-SHA256 chained from ``"AWS4" + secret`` over the date, the
   region, the service and ``aws4_request``; the signature is the hex HMAC of the string to
   sign under it;
4. ``Authorization: AWS4-HMAC-SHA256 Credential=<key id>/<scope>, SignedHeaders=<names>,
   Signature=<hex>``.

``tests/test_channel_email_apis.py`` checks this module against AWS's published
"Signature Version 4 test suite" cases.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import parse_qsl, quote, urlsplit

__all__ = [
    "ALGORITHM",
    "Credentials",
    "canonical_request",
    "payload_hash",
    "sign",
    "signing_key",
    "string_to_sign",
]

ALGORITHM = "AWS4-HMAC-SHA256"
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class Credentials:
    """An AWS access key (and the session token of temporary credentials)."""

    access_key_id: str
    secret_access_key: str
    session_token: str | None = None

    def __repr__(self) -> str:  # never the secret
        return f"Credentials(access_key_id={self.access_key_id!r})"


def _encode(value: str) -> str:
    """URI-encode as SigV4 wants: every byte but ``A-Z a-z 0-9 - _ . ~``."""
    return quote(value, safe="-_.~")


def payload_hash(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def canonical_request(
    method: str,
    path: str,
    query: Sequence[tuple[str, str]],
    headers: Mapping[str, str],
    body_hash: str,
) -> tuple[str, str]:
    """The canonical request and the signed headers' names (``host;x-amz-date``).

    ``path`` is the path as sent (percent-encoded already); ``headers`` are the headers to
    sign, by any case of their names."""
    segments = (path or "/").split("/")
    canonical_path = "/".join(quote(segment, safe="-_.~") for segment in segments)
    canonical_query = "&".join(
        f"{k}={v}" for k, v in sorted((_encode(name), _encode(value)) for name, value in query)
    )
    folded: dict[str, str] = {}
    for name, value in headers.items():
        key = name.strip().lower()
        clean = _SPACES.sub(" ", value.strip())
        folded[key] = f"{folded[key]},{clean}" if key in folded else clean
    names = sorted(folded)
    signed = ";".join(names)
    header_block = "".join(f"{name}:{folded[name]}\n" for name in names)
    text = "\n".join([method.upper(), canonical_path, canonical_query, header_block, signed, body_hash])
    return text, signed


def string_to_sign(amz_date: str, scope: str, canonical: str) -> str:
    digest = hashlib.sha256(canonical.encode()).hexdigest()
    return f"{ALGORITHM}\n{amz_date}\n{scope}\n{digest}"


def signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    key = ("AWS4" + secret).encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def sign(
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    credentials: Credentials,
    region: str,
    service: str,
    now: datetime | None = None,
    content_sha256_header: bool = True,
) -> dict[str, str]:
    """``headers`` with what makes the request signed: ``host`` (when not given),
    ``x-amz-date``, ``x-amz-content-sha256`` (unless ``content_sha256_header`` is False),
    ``x-amz-security-token`` (temporary credentials) and ``authorization``. Every header
    returned is signed, so send them all and nothing else that AWS would check."""
    at = (now or datetime.now(UTC)).astimezone(UTC)
    amz_date = at.strftime("%Y%m%dT%H%M%SZ")
    date = amz_date[:8]
    parts = urlsplit(url)
    out = {name.lower(): value for name, value in headers.items()}
    out.setdefault("host", parts.netloc)
    out["x-amz-date"] = amz_date
    body_hash = payload_hash(body)
    if content_sha256_header:
        out["x-amz-content-sha256"] = body_hash
    if credentials.session_token:
        out["x-amz-security-token"] = credentials.session_token
    out.pop("authorization", None)
    query = parse_qsl(parts.query, keep_blank_values=True)
    canonical, signed = canonical_request(method, parts.path, query, out, body_hash)
    scope = f"{date}/{region}/{service}/aws4_request"
    key = signing_key(credentials.secret_access_key, date, region, service)
    signature = hmac.new(key, string_to_sign(amz_date, scope, canonical).encode(), hashlib.sha256).hexdigest()
    out["authorization"] = (
        f"{ALGORITHM} Credential={credentials.access_key_id}/{scope}, "
        f"SignedHeaders={signed}, Signature={signature}"
    )
    return out
