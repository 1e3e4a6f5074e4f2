"""The two push vendors as the push tests see them: one object per vendor that starts its fake,
writes the provider's options and says where the vendor's answers and counters are, so the
tests in ``tests/test_channel_push*.py`` run once per vendor instead of a file per vendor; and
the fixtures those modules share (``vendor`` is parametrised over both)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

import noti
from noti.channels.push.apns import ApnsProvider
from noti.channels.push.fcm import FcmProvider
from noti.core.attempt import ClaimState
from noti.core.record import Channel
from noti.providers.base import Message
from tests.conftest import MEMBER
from tests.fakes._h2 import Tls, make_tls
from tests.fakes._server import Reply
from tests.fakes.apns import KEY_ID, TEAM_ID, ApnsFake, apns_error, device_token
from tests.fakes.fcm import FcmFake, fcm_error, fcm_token

__all__ = [
    "APNS",
    "FCM",
    "VENDORS",
    "Vendor",
    "add",
    "fake",
    "message",
    "provider",
    "push_material",
    "rt",
    "send_now",
    "vendor",
]


@dataclass
class Vendor:
    """What differs between the vendors, behind one interface."""

    kind: str
    #: Set by the test module: the key material and TLS made once per session.
    material: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.kind

    # --- the fake ------------------------------------------------------------------------------

    @contextmanager
    def fake(self) -> Iterator[Any]:
        if self.kind == "fcm":
            with FcmFake(self.material["rsa"]) as fcm:
                yield fcm
        else:
            with ApnsFake(self.material["tls"], keys={KEY_ID: self.material["ec"]}) as apns:
                yield apns

    def options(self, fake: Any, tmp: Path, **overrides: Any) -> dict[str, Any]:
        if self.kind == "fcm":
            account = tmp / "service-account.json"
            account.write_text(json.dumps(fake.service_account()))
            base = {"kind": "fcm", "service_account_file": str(account), "api_base": fake.url}
        else:
            key = tmp / f"AuthKey_{KEY_ID}.p8"
            key.write_text(fake.p8())
            base = {
                "kind": "apns",
                "key_id": KEY_ID,
                "team_id": TEAM_ID,
                "private_key_file": str(key),
                "topic": "com.example.noti",
                "base_url": fake.url,
                "ca_file": fake.ca_file,
            }
        return {**base, "timeout_s": 2.0, **overrides}

    def toml(self, options: dict[str, Any]) -> str:
        """``[providers.p]`` for a worker process's settings file."""
        lines = ["[channels.push]", 'provider = "p"', "[providers.p]"]
        lines += [f"{key} = {json.dumps(value)}" for key, value in options.items()]
        return "\n".join(lines) + "\n"

    def secret(self, fake: Any) -> str:
        """A piece of the vendor key's PEM that must never show anywhere."""
        pem = fake.service_account()["private_key"] if self.kind == "fcm" else fake.p8()
        return pem.splitlines()[2][:32]

    def target(self, n: int = 0) -> str:
        return fcm_token(n) if self.kind == "fcm" else device_token(n)

    @property
    def provider_class(self) -> type:
        return FcmProvider if self.kind == "fcm" else ApnsProvider

    # --- what the vendor got -------------------------------------------------------------------

    def sent(self, fake: Any) -> list[dict[str, Any]]:
        """Each accepted push as ``{target, title, body, data, collapse, high, msgid}``."""
        out = []
        for push in fake.sent:
            if self.kind == "fcm":
                note = push.get("notification", {})
                out.append(
                    {
                        "target": push["token"],
                        "title": note.get("title"),
                        "body": note.get("body"),
                        "data": push.get("data", {}),
                        "collapse": push.get("android", {}).get("collapse_key"),
                        "high": push["android"]["priority"] == "HIGH",
                        "msgid": push["name"],
                    }
                )
            else:
                payload = dict(push["payload"])
                alert = payload.pop("aps")["alert"]
                out.append(
                    {
                        "target": push["token"],
                        "title": alert.get("title"),
                        "body": alert.get("body"),
                        "data": payload,
                        "collapse": push["headers"].get("apns-collapse-id"),
                        "high": push["headers"]["apns-priority"] == "10",
                        "msgid": push["apns_id"],
                    }
                )
        return out

    def calls(self, fake: Any) -> int:
        """Pushes the vendor was asked to deliver (accepted or not)."""
        return len(fake.send_calls) if self.kind == "fcm" else len(fake.requests)

    def credentials_made(self, fake: Any) -> int:
        """Access tokens issued (FCM) / provider tokens APNs saw (APNs)."""
        return len(fake.issued) if self.kind == "fcm" else fake.token_updates

    def account(self) -> str:
        """The account part of the provider's credential key."""
        return (
            "noti-sender@noti-push-test.iam.gserviceaccount.com"
            if self.kind == "fcm"
            else f"{TEAM_ID}.{KEY_ID}"
        )

    # --- the vendor's answers ------------------------------------------------------------------

    def kill(self, fake: Any, target: str) -> str:
        """The app behind ``target`` is gone; the vendor's reason for it."""
        fake.unregister(target)
        return "UNREGISTERED" if self.kind == "fcm" else "Unregistered"

    def expire_credential(self, fake: Any, provider: Any) -> None:
        """Make the vendor refuse the cached credential as expired."""
        if self.kind == "fcm":
            fake.expire_tokens()
        else:  # an hour later, on both clocks
            later = fake.clock() + 3700
            fake.clock = provider.clock = lambda: later

    def credential_refused(self) -> Reply:
        return fcm_error(None, status=401) if self.kind == "fcm" else apns_error("ExpiredProviderToken")

    def rate_limited(self, retry_after: str | None) -> Reply:
        if self.kind == "fcm":
            return fcm_error("QUOTA_EXCEEDED", retry_after=retry_after)
        return apns_error("TooManyRequests", retry_after=retry_after)

    def error(self, code: str) -> Reply:
        return fcm_error(code) if self.kind == "fcm" else apns_error(code)


FCM = Vendor("fcm")
APNS = Vendor("apns")
VENDORS = [FCM, APNS]


def make_material(tls: Tls) -> dict[str, Any]:
    return {
        "rsa": rsa.generate_private_key(public_exponent=65537, key_size=2048),
        "ec": ec.generate_private_key(ec.SECP256R1()),
        "tls": tls,
    }


# --- fixtures and helpers of the push tests ------------------------------------------------------


@pytest.fixture(scope="session")
def push_material(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    material = make_material(make_tls(tmp_path_factory.mktemp("push-tls")))
    for vendor in VENDORS:
        vendor.material.update(material)
    return material


@pytest.fixture(params=VENDORS, ids=str)
def vendor(request: pytest.FixtureRequest, push_material: dict[str, Any]) -> Vendor:
    chosen: Vendor = request.param
    return chosen


@pytest.fixture
def fake(vendor: Vendor, push_material: dict[str, Any]) -> Iterator[Any]:
    with vendor.fake() as running:
        yield running


@pytest.fixture
def rt(configure: Any, vendor: Vendor, fake: Any, tmp_path: Path) -> Any:
    return configure(providers={"p": vendor.options(fake, tmp_path)}, channels={"push": {"provider": "p"}})


def provider(rt: Any) -> Any:
    return rt.providers.get("p")


def message(vendor: Vendor, record_id: str = "01JPUSHRECORD000000000001", **fields: Any) -> Message:
    return Message(
        id=record_id, channel=Channel.PUSH, target=vendor.target(), fields={"body": "hello", **fields}
    )


def send_now(rt: Any, record_id: str) -> Any:
    [result] = noti.send(record_id, user=MEMBER)
    assert result.claim is ClaimState.CLAIMED, result
    return rt.store.get(record_id)


def add(vendor: Vendor, n: int = 0, **fields: Any) -> str:
    fields.setdefault("body", "Your order shipped")
    if "lv" in fields:  # a plain user's level is capped at 1: levels are root members' to give
        fields.setdefault("user", MEMBER)
    return noti.notify_push(vendor.target(n), **fields)
