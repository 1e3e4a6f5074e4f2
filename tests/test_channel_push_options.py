"""The push providers' add-time checks, options and secrets (FCM and APNs, each test once per
vendor: :mod:`tests.push_vendors`): what a vendor would refuse is refused before anything is
stored, hostile options are refused when the provider is configured, and no key, credential
or device token reaches a log, an error or a repr."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

import noti
from noti.core.record import Status
from noti.errors import InvalidConfig, InvalidInput
from tests.push_vendors import *  # noqa: F403 - the fixtures vendor, fake, rt, push_material
from tests.push_vendors import APNS, FCM, Vendor, add, message, provider, send_now

# --- add-time checks ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("vendor", "target", "fields", "code"),
    [
        (FCM, None, {"data": {"count": 1}}, "e.cmd.noti.add.badcontent"),  # FCM data values are strings
        (FCM, None, {"data": {"google.sent_time": "1"}}, "e.cmd.noti.add.badcontent"),
        (FCM, None, {"data": {"from": "x"}}, "e.cmd.noti.add.badcontent"),
        (FCM, None, {"body": "é" * 1500, "data": {"k": "v" * 1200}}, "e.cmd.noti.add.badcontent"),
        (FCM, "token.with.dots", {}, "e.cmd.noti.add.badtarget"),
        (APNS, "not-hex-at-all", {}, "e.cmd.noti.add.badtarget"),
        (APNS, "abc", {}, "e.cmd.noti.add.badtarget"),  # odd length, too short
        (APNS, None, {"data": {"aps": {"badge": 1}}}, "e.cmd.noti.add.badcontent"),
        (APNS, None, {"collapse": "é" * 40}, "e.cmd.noti.add.badfield"),  # 80 bytes
        (APNS, None, {"body": "x" * 3000, "data": {"k": "y" * 1500}}, "e.cmd.noti.add.badcontent"),
    ],
    ids=lambda v: str(v)[:24],
)
def test_what_the_vendor_would_refuse_is_refused_at_add_time(
    rt: Any, vendor: Vendor, fake: Any, target: str | None, fields: dict[str, Any], code: str
) -> None:
    with pytest.raises(InvalidInput) as info:
        noti.notify_push(target or vendor.target(), **{"body": "hi", **fields})
    assert info.value.code == code and rt.store.count() == 0 and vendor.calls(fake) == 0


def test_apns_data_may_be_any_json_and_fcm_strings_only(rt: Any, vendor: Vendor, fake: Any) -> None:
    data = {"order": "42"} if vendor is FCM else {"order": 42, "items": ["a", "b"], "paid": True}
    assert send_now(rt, add(vendor, data=data)).status is Status.DONE
    assert vendor.sent(fake)[0]["data"] == data


# --- options ---------------------------------------------------------------------------------------

SECRET_MARK = "PRIVATE KEY"  # a PEM key quoted in an error would show it


@pytest.mark.parametrize(
    ("vendor", "overrides", "names"),
    [
        (FCM, {"service_account_file": "/nonexistent/sa.json"}, "service_account_file"),
        (FCM, {"service_account": '{"type": "service_account"}'}, "service_account_file"),  # both given
        (FCM, {"api_base": "https://fcm.example/v1?x=1"}, "api_base"),
        (FCM, {"api_base": "https://fcm.example\r\nX-Evil: 1"}, "api_base"),
        (FCM, {"project_id": "../../other/project"}, "project_id"),
        (FCM, {"ttl_s": -1}, "ttl_s"),
        (FCM, {"ttl_s": 2_419_201}, "ttl_s"),
        (FCM, {"high_level": 0}, "high_level"),
        (FCM, {"surprise": True}, "surprise"),
        (APNS, {"key_id": "short"}, "key_id"),
        (APNS, {"team_id": "abcde12345"}, "team_id"),
        (APNS, {"topic": "com.example.app\r\napns-priority: 10"}, "topic"),
        (APNS, {"environment": "staging"}, "environment"),
        (APNS, {"base_url": "http://api.push.apple.com"}, "base_url"),
        (APNS, {"ca_file": "/nonexistent/ca.pem"}, "ca_file"),
        (APNS, {"jwt_reuse_s": 600}, "jwt_reuse_s"),  # APNs refuses updates within 20 minutes
        (APNS, {"jwt_reuse_s": 3600}, "jwt_reuse_s"),  # nor takes a JWT an hour old
        (
            APNS,
            {"private_key": "-----BEGIN PRIVATE KEY-----\nMIIx\n-----END PRIVATE KEY-----"},
            "private_key",
        ),
    ],
    ids=lambda v: str(v)[:30],
)
def test_hostile_options_are_refused_at_config_load(
    configure: Any, vendor: Vendor, fake: Any, tmp_path: Path, overrides: dict[str, Any], names: str
) -> None:
    rt = configure(
        providers={"p": vendor.options(fake, tmp_path, **overrides)}, channels={"push": {"provider": "p"}}
    )
    with pytest.raises(InvalidConfig) as info:
        rt.providers.get("p")
    assert f"[providers.p] {names}" in info.value.message or names in info.value.message
    assert SECRET_MARK not in str(info.value)
    with pytest.raises(InvalidConfig):  # and nothing can be added through it
        noti.notify_push(vendor.target(), body="hi")
    assert rt.store.count() == 0


@pytest.mark.parametrize(
    "account",
    [
        {"type": "authorized_user"},  # a user's credentials, not a service account
        {"private_key": None},
        {"private_key": "not a key"},
        {"client_email": "no-at-sign"},
        {"token_uri": "file:///etc/passwd"},
        {"project_id": "Bad_Project"},
        {"private_key_id": "../x"},
    ],
    ids=str,
)
def test_a_bad_service_account_is_refused_without_quoting_it(
    configure: Any, push_material: Any, tmp_path: Path, account: dict[str, Any]
) -> None:
    with FCM.fake() as fake:
        data = {k: v for k, v in fake.service_account(**account).items() if v is not None}
        (tmp_path / "sa.json").write_text(json.dumps(data))
        rt = configure(
            providers={"p": FCM.options(fake, tmp_path, service_account_file=str(tmp_path / "sa.json"))},
            channels={"push": {"provider": "p"}},
        )
        with pytest.raises(InvalidConfig) as info:
            rt.providers.get("p")
    assert "service account" in info.value.message and SECRET_MARK not in str(info.value)


def test_an_apns_key_of_another_curve_is_refused(configure: Any, push_material: Any, tmp_path: Path) -> None:
    other = ec.generate_private_key(ec.SECP384R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    with APNS.fake() as fake:
        options = APNS.options(fake, tmp_path, private_key=other.decode())
        del options["private_key_file"]
        rt = configure(providers={"p": options}, channels={"push": {"provider": "p"}})
        with pytest.raises(InvalidConfig) as info:
            rt.providers.get("p")
    assert "P-256" in info.value.message and SECRET_MARK not in str(info.value)


def test_secrets_and_tokens_never_show(
    rt: Any, vendor: Vendor, fake: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    instance = provider(rt)
    receipt = instance.send(message(vendor))
    credential = rt.redis.get(rt.keys.credential(vendor.kind, vendor.account()))
    fake.script(vendor.credential_refused(), vendor.credential_refused())
    record = send_now(rt, add(vendor))
    texts = [
        repr(instance),
        repr(instance.options),
        str(instance.options),
        repr(receipt),
        record.errmsg,
        caplog.text,
    ]
    for text in texts:
        assert vendor.secret(fake) not in text and credential not in text
        assert vendor.target() not in text or text is record.errmsg
