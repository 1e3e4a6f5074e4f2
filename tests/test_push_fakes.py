"""The push fakes check JWTs as the vendors do, and noti's JWT signing agrees with the
standard: RFC 7515's own examples are the known-answer vectors (neither Google nor Apple
publishes any), then tokens built here and tampered ones are handed to each fake."""

from __future__ import annotations

import base64
import json
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from noti.channels.push import _jwt as noti_jwt
from tests.fakes import _jwt
from tests.fakes._tls import Tls, make_tls
from tests.fakes.apns import BUNDLE_ID, KEY_ID, TEAM_ID, ApnsFake, device_token
from tests.fakes.fcm import FCM_SCOPE, JWT_BEARER, FcmFake, fcm_token

# --- RFC 7515 Appendix A.2 (RS256) and A.3 (ES256) ------------------------------------------------

RFC_PAYLOAD = "eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ"
A2_N = (
    "ofgWCuLjybRlzo0tZWJjNiuSfb4p4fAkd_wWJcyQoTbji9k0l8W26mPddxHmfHQp-Vaw-4qPCJrcS2mJPMEzP1Pt0Bm4d4QlL-yRT-SFd2lZS-"
    "pCgNMsD1W_YpRPEwOWvG6b32690r2jZ47soMZo9wGzjb_7OMg0LOL-bSf63kpaSHSXndS5z5rexMdbBYUsLA9e-KXBdQOS-UTo7WTBEMa2R2Cap"
    "Hg665xsmtdVMTBQY4uDZlxvb3qCo5ZwKh9kG4LT6_I5IhlJH7aGhyxXFvUK-DWNmoudF8NAco9_h9iaGNj8q2ethFkMLs91kzk2PAcDTW9gb54h"
    "4FRWyuXpoQ"
)
A2_D = (
    "Eq5xpGnNCivDflJsRQBXHx1hdR1k6Ulwe2JZD50LpXyWPEAeP88vLNO97IjlA7_GQ5sLKMgvfTeXZx9SE-7YwVol2NXOoAJe46sui395IW_GO-"
    "pWJ1O0BkTGoVEn2bKVRUCgu-GjBVaYLU6f3l9kJfFNS3E0QbVdxzubSu3Mkqzjkn439X0M_V51gfpRLI9JYanrC4D4qAdGcopV_0ZHHzQlBjudU2"
    "QvXt4ehNYTCBr6XCLQUShb1juUO1ZdiYoFaFQT5Tw8bGUl_x_jTj3ccPDVZFD9pIuhLhBOneufuBiB4cS98l2SR_RQyGWSeWjnczT0QU91p1DhOV"
    "RuOopznQ"
)
A2_SIGNATURE = (
    "cC4hiUPoj9Eetdgtv3hF80EGrhuB__dzERat0XF9g2VtQgr9PJbu3XOiZj5RZmh7AAuHIm4Bh-0Qc_lF5YKt_O8W2Fp5jujGbds9uJdbF9CUAr7t1"
    "dnZcAcQjbKBYNX4BAynRFdiuB--f_nZLgrnbyTyWzO75vRK5h6xBArLIARNPvkSjtQBMHlb1L07Qe7K0GarZRmB_eSN9383LcOLn6_dO--xi12jz"
    "DwusC-eOkHWEsqtFZESc6BfI7noOPqvhJ1phCnvWh6IeYI2w9QOYEUipUTI8np6LbgGY9Fs98rqVt5AXLIhWkWywlVmtVrBp0igcN_IoypGlUPQG"
    "e77Rw"
)
A3_X, A3_Y = "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU", "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"
A3_D = "jpsQnnGQmL-YBIffH1136cspYG6-0iY7X1fCE9-E9LI"
A3_JWS = (
    "eyJhbGciOiJFUzI1NiJ9."
    + RFC_PAYLOAD
    + (".DtEhU3ljbEg8L38VWAfUAqOyKAM6-Xx-F4GawxaepmXFCgfTjDxw5djxLa8ISlSApmWQxfKTUJqPP3-Kg6NU1Q")
)


def _int(text: str) -> int:
    return int.from_bytes(_jwt.b64url_decode(text), "big")


def rfc_rsa_key() -> rsa.RSAPrivateKey:
    n, e, d = _int(A2_N), 65537, _int(A2_D)
    p, q = rsa.rsa_recover_prime_factors(n, e, d)
    numbers = rsa.RSAPrivateNumbers(
        p,
        q,
        d,
        rsa.rsa_crt_dmp1(d, p),
        rsa.rsa_crt_dmq1(d, q),
        rsa.rsa_crt_iqmp(p, q),
        rsa.RSAPublicNumbers(e, n),
    )
    return numbers.private_key()


def rfc_ec_key() -> ec.EllipticCurvePrivateKey:
    public = ec.EllipticCurvePublicNumbers(_int(A3_X), _int(A3_Y), ec.SECP256R1())
    return ec.EllipticCurvePrivateNumbers(_int(A3_D), public).private_key()


def test_noti_signs_rfc_7515_a2_exactly() -> None:
    # RS256 (PKCS #1 v1.5) is deterministic: the RFC's signature, byte for byte
    signing_input = f"eyJhbGciOiJSUzI1NiJ9.{RFC_PAYLOAD}".encode()
    assert noti_jwt.b64url(noti_jwt.signature(rfc_rsa_key(), signing_input)) == A2_SIGNATURE
    # and the fake's verifier takes the RFC's token
    decoded = _jwt.verify(f"{signing_input.decode()}.{A2_SIGNATURE}", rfc_rsa_key().public_key(), "RS256")
    assert decoded.claims["iss"] == "joe"


def test_the_fakes_verify_rfc_7515_a3_and_refuse_it_tampered() -> None:
    public = rfc_ec_key().public_key()
    assert _jwt.verify(A3_JWS, public, "ES256").claims["exp"] == 1300819380
    for tampered in (A3_JWS[:-1] + "A", A3_JWS.replace(RFC_PAYLOAD[:10], RFC_PAYLOAD[:9] + "Z")):
        with pytest.raises(_jwt.BadToken):
            _jwt.verify(tampered, public, "ES256")
    with pytest.raises(_jwt.BadToken):  # the algorithm is the verifier's, not the token's, choice
        _jwt.verify(A3_JWS, public, "RS256")


def test_noti_es256_signatures_are_r_and_s_and_verify_with_the_rfc_key() -> None:
    key = rfc_ec_key()
    token = noti_jwt.sign_jwt({"alg": "ES256", "kid": KEY_ID}, {"iss": TEAM_ID, "iat": 1}, key)
    assert len(_jwt.b64url_decode(token.rsplit(".", 1)[1])) == 64  # not DER
    assert _jwt.verify(token, key.public_key(), "ES256").header == {"alg": "ES256", "kid": KEY_ID}


# --- the FCM fake's token endpoint ----------------------------------------------------------------


@pytest.fixture(scope="module")
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def fcm(rsa_key: rsa.RSAPrivateKey) -> Iterator[FcmFake]:
    with FcmFake(rsa_key) as fake:
        yield fake


def assertion(fcm: FcmFake, key: Any = None, header: dict[str, Any] | None = None, **claims: Any) -> str:
    now = int(time.time())
    body = {
        "iss": fcm.client_email,
        "scope": FCM_SCOPE,
        "aud": f"{fcm.url}/token",
        "iat": now,
        "exp": now + 3600,
    }
    body.update(claims)
    head = header or {"alg": "RS256", "typ": "JWT", "kid": fcm.private_key_id}
    return _jwt.sign(head, {k: v for k, v in body.items() if v is not None}, key or fcm.key)


def ask_token(fcm: FcmFake, token: str, grant: str = JWT_BEARER) -> httpx.Response:
    return httpx.post(f"{fcm.url}/token", data={"grant_type": grant, "assertion": token})


def test_a_good_assertion_gets_an_access_token(fcm: FcmFake) -> None:
    answer = ask_token(fcm, assertion(fcm)).json()
    assert answer["token_type"] == "Bearer" and answer["expires_in"] == 3599
    assert answer["access_token"] in fcm.issued


def tampered(token: str) -> str:
    head, body, signature = token.split(".")
    claims = json.loads(_jwt.b64url_decode(body))
    claims["scope"] = "https://www.googleapis.com/auth/cloud-platform"
    return f"{head}.{_jwt.b64url(json.dumps(claims).encode())}.{signature}"


@pytest.mark.parametrize(
    ("make", "status", "error"),
    [
        (lambda f: tampered(assertion(f)), 400, "invalid_grant"),
        (
            lambda f: assertion(f, key=rsa.generate_private_key(public_exponent=65537, key_size=2048)),
            400,
            "invalid_grant",
        ),
        (lambda f: assertion(f, header={"alg": "RS256", "kid": "0" * 40}), 400, "invalid_grant"),
        (lambda f: assertion(f, header={"alg": "none", "kid": f.private_key_id}), 400, "invalid_grant"),
        (lambda f: assertion(f, iss="someone@else.iam.gserviceaccount.com"), 401, "invalid_client"),
        (lambda f: assertion(f, aud="https://oauth2.googleapis.com/token"), 400, "invalid_grant"),
        (
            lambda f: assertion(f, scope="https://www.googleapis.com/auth/cloud-platform"),
            400,
            "invalid_scope",
        ),
        (lambda f: assertion(f, scope=None), 400, "invalid_scope"),
        (lambda f: assertion(f, exp=int(time.time()) + 7200), 400, "invalid_grant"),  # over an hour
        (
            lambda f: assertion(f, iat=int(time.time()) - 7200, exp=int(time.time()) - 3600),
            400,
            "invalid_grant",
        ),
        (lambda f: assertion(f, iat=int(time.time()) + 600), 400, "invalid_grant"),  # from the future
        (lambda f: "not.a.jwt", 400, "invalid_grant"),
    ],
    ids=[
        "tampered",
        "other-key",
        "unknown-kid",
        "alg-none",
        "iss",
        "aud",
        "scope",
        "no-scope",
        "long",
        "expired",
        "future",
        "garbage",
    ],
)
def test_the_token_endpoint_refuses_bad_assertions(fcm: FcmFake, make: Any, status: int, error: str) -> None:
    answer = ask_token(fcm, make(fcm))
    assert (answer.status_code, answer.json()["error"]) == (status, error) and fcm.issued == []


def test_the_token_endpoint_refuses_another_grant(fcm: FcmFake) -> None:
    answer = ask_token(fcm, assertion(fcm), grant="client_credentials")
    assert (answer.status_code, answer.json()["error"]) == (400, "unsupported_grant_type")


def send(
    fcm: FcmFake, token: str | None, message: dict[str, Any], project: str | None = None
) -> httpx.Response:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    url = f"{fcm.url}/v1/projects/{project or fcm.project_id}/messages:send"
    return httpx.post(url, json={"message": message}, headers=headers)


@pytest.mark.parametrize(
    ("bearer", "project", "message", "status", "where"),
    [
        (None, None, {"token": fcm_token()}, 401, "UNAUTHENTICATED"),
        ("ya29.forged", None, {"token": fcm_token()}, 401, "UNAUTHENTICATED"),
        ("good", "another-project", {"token": fcm_token()}, 403, "PERMISSION_DENIED"),
        ("good", None, {"token": fcm_token(), "data": {"n": 1}}, 400, "message.data[0].value"),
        ("good", None, {"token": fcm_token(), "android": {"ttl": "4w"}}, 400, "message.android.ttl"),
        ("good", None, {"token": "bogus"}, 400, "not a valid FCM registration token"),
        ("good", None, {"token": fcm_token(), "data": {"k": "v" * 5000}}, 400, "too big"),
    ],
    ids=["no-bearer", "forged", "project", "data-int", "ttl", "token", "size"],
)
def test_the_send_endpoint_checks_as_fcm_does(
    fcm: FcmFake, bearer: str | None, project: str | None, message: dict[str, Any], status: int, where: str
) -> None:
    token = ask_token(fcm, assertion(fcm)).json()["access_token"] if bearer == "good" else bearer
    answer = send(fcm, token, message, project)
    assert answer.status_code == status and where in answer.text and fcm.sent == []


def test_an_expired_access_token_is_refused(fcm: FcmFake) -> None:
    token = ask_token(fcm, assertion(fcm)).json()["access_token"]
    assert send(fcm, token, {"token": fcm_token()}).status_code == 200
    fcm.expire_tokens()
    assert send(fcm, token, {"token": fcm_token()}).json()["error"]["status"] == "UNAUTHENTICATED"


# --- the APNs fake --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    return make_tls(tmp_path_factory.mktemp("apns-tls"))


@pytest.fixture
def apns(tls: Tls) -> Iterator[ApnsFake]:
    with ApnsFake(tls) as fake:
        yield fake


def provider_token(
    apns: ApnsFake, key: Any = None, header: dict[str, Any] | None = None, **claims: Any
) -> str:
    body = {"iss": TEAM_ID, "iat": int(time.time()), **claims}
    return _jwt.sign(header or {"alg": "ES256", "kid": KEY_ID}, body, key or apns.keys[KEY_ID])


def push(
    apns: ApnsFake, jwt: str | None, token: str = device_token(), body: bytes = b'{"aps":{}}', **extra: str
) -> httpx.Response:
    headers = {"apns-topic": BUNDLE_ID, **extra}
    if jwt is not None:
        headers["authorization"] = f"bearer {jwt}"
    client = httpx.Client(http1=False, http2=True, verify=ssl.create_default_context(cafile=apns.ca_file))
    with client:
        return client.post(f"{apns.url}/3/device/{token}", content=body, headers=headers)


def test_a_good_provider_token_is_taken_over_http2_and_the_apns_id_echoed(apns: ApnsFake) -> None:
    answer = push(apns, provider_token(apns), **{"apns-id": "123E4567-E89B-12D3-A456-426614174000"})
    assert answer.http_version == "HTTP/2" and answer.status_code == 200
    assert answer.headers["apns-id"] == "123E4567-E89B-12D3-A456-426614174000"
    assert push(apns, provider_token(apns)).headers["apns-id"]  # made up when absent


def es256_tampered(token: str) -> str:
    head, _, signature = token.split(".")
    claims = _jwt.b64url(json.dumps({"iss": "OTHERTEAM1", "iat": int(time.time())}).encode())
    return f"{head}.{claims}.{signature}"


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda a: None, "MissingProviderToken"),
        (lambda a: es256_tampered(provider_token(a)), "InvalidProviderToken"),
        (lambda a: provider_token(a, key=ec.generate_private_key(ec.SECP256R1())), "InvalidProviderToken"),
        (lambda a: provider_token(a, header={"alg": "ES256", "kid": "OTHERKEY12"}), "InvalidProviderToken"),
        (lambda a: provider_token(a, header={"alg": "HS256", "kid": KEY_ID}), "InvalidProviderToken"),
        (lambda a: provider_token(a, iss="OTHERTEAM1"), "InvalidProviderToken"),
        (lambda a: provider_token(a, iat=int(time.time()) - 3700), "ExpiredProviderToken"),
        (
            lambda a: "e30.e30." + base64.urlsafe_b64encode(b"x" * 64).decode().rstrip("="),
            "InvalidProviderToken",
        ),
    ],
    ids=["missing", "tampered", "other-key", "unknown-kid", "hs256", "iss", "old", "unsigned"],
)
def test_bad_provider_tokens_are_refused(apns: ApnsFake, make: Any, reason: str) -> None:
    answer = push(apns, make(apns))
    assert answer.status_code == 403 and answer.json() == {"reason": reason} and apns.sent == []


def test_a_second_provider_token_within_20_minutes_is_too_many_updates(apns: ApnsFake) -> None:
    assert push(apns, provider_token(apns)).status_code == 200
    later = provider_token(apns, iat=int(time.time()) - 1)
    answer = push(apns, later)
    assert (answer.status_code, answer.json()["reason"]) == (429, "TooManyProviderTokenUpdates")
    apns.forget_token_updates()
    assert push(apns, later).status_code == 200 and apns.token_updates == 2


@pytest.mark.parametrize(
    ("extra", "token", "body", "status", "reason"),
    [
        ({"apns-topic": "com.example.other"}, device_token(), b"{}", 400, "TopicDisallowed"),
        ({"apns-topic": "not a bundle"}, device_token(), b"{}", 400, "BadTopic"),
        ({"apns-priority": "7"}, device_token(), b"{}", 400, "BadPriority"),
        ({"apns-push-type": "background", "apns-priority": "10"}, device_token(), b"{}", 400, "BadPriority"),
        ({"apns-push-type": "fax"}, device_token(), b"{}", 400, "InvalidPushType"),
        ({"apns-expiration": "tomorrow"}, device_token(), b"{}", 400, "BadExpirationDate"),
        ({"apns-collapse-id": "c" * 65}, device_token(), b"{}", 400, "BadCollapseId"),
        ({"apns-id": "not-a-uuid"}, device_token(), b"{}", 400, "BadMessageId"),
        ({}, "zz" * 32, b"{}", 400, "BadDeviceToken"),
        ({}, device_token(), b"", 400, "PayloadEmpty"),
        ({}, device_token(), b'{"aps":{"alert":"' + b"x" * 4100 + b'"}}', 413, "PayloadTooLarge"),
    ],
    ids=[
        "topic",
        "bad-topic",
        "priority",
        "background",
        "push-type",
        "expiration",
        "collapse",
        "apns-id",
        "token",
        "empty",
        "large",
    ],
)
def test_the_apns_fake_checks_headers_and_payload(
    apns: ApnsFake, extra: dict[str, str], token: str, body: bytes, status: int, reason: str
) -> None:
    answer = push(apns, provider_token(apns), token=token, body=body, **extra)
    assert (answer.status_code, answer.json()["reason"]) == (status, reason)


def test_an_unregistered_token_is_410_with_its_timestamp(apns: ApnsFake) -> None:
    apns.unregister(device_token(3), at_ms=1_700_000_000_000)
    answer = push(apns, provider_token(apns), token=device_token(3))
    assert answer.status_code == 410 and answer.json() == {
        "reason": "Unregistered",
        "timestamp": 1_700_000_000_000,
    }


def test_the_tls_certificate_is_checked(apns: ApnsFake, tmp_path: Path) -> None:
    other = make_tls(tmp_path / "other")
    client = httpx.Client(
        http1=False, http2=True, verify=ssl.create_default_context(cafile=str(other.ca_file))
    )
    with client, pytest.raises(httpx.ConnectError):
        client.post(f"{apns.url}/3/device/{device_token()}", content=b"{}")
