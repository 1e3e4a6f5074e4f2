"""Point 3 of issue 32, over HTTP: a receipt speaks only for what its provider sent.

Finding 2 was made with a *correctly keyed* Aliyun push: the door opened, and the push marked
an unsent record bound elsewhere "delivered", another user's unsent SMS "undelivered". Here
the same pushes, with the right key (and signed sandbox receipts, with the right secret), name
alice's and bob's waiting records and the record Twilio's fake sent and delivered: the vendor
gets its usual answer, and no record's delivery state moves (read back as the root
administrator). Point 8's trailing-slash redirect is here too: never a ``Location``.
"""

from __future__ import annotations

import json

import httpx
import pytest

from noti.providers.sandbox import sign_receipt
from tests.hostile_http.conftest import Deployment

#: (seeded record, its delivery state before and after)
RECORDS = [("alice_record", None), ("bob_record", None), ("tw_record", "delivered")]


def _aliyun(record_id: str, success: bool) -> bytes:
    report = {
        "phone_number": "13912345678",
        "send_time": "2026-01-01 11:12:13",
        "report_time": "2026-01-01 11:12:14",
        "success": success,
        "err_code": "DELIVERED" if success else "MK:0005",
        "err_msg": "forged",
        "sms_size": "1",
        "biz_id": "932702304080415357^0",
        "out_id": record_id,
    }
    return json.dumps([report]).encode()


def _delivery(deployment: Deployment, client: httpx.Client, record: str) -> object:
    answer = deployment.ask(client, "GET", f"/v1/notifications/{{{record}}}", who="boss")
    assert answer.status_code == 200, answer.text
    return answer.json().get("noti_dlv")


@pytest.mark.parametrize("success", [True, False], ids=["delivered", "undelivered"])
@pytest.mark.parametrize(("record", "state"), RECORDS, ids=[r[0] for r in RECORDS])
def test_a_keyed_aliyun_push_moves_no_record_aliyun_did_not_send(
    deployment: Deployment, client: httpx.Client, record: str, state: object, success: bool
) -> None:
    assert _delivery(deployment, client, record) == state
    answer = deployment.ask(
        client,
        "POST",
        f"/v1/receipts/ali/{deployment.keys['ali_receipt']}",
        who=None,
        content=_aliyun(deployment.ids[record], success),
        headers={"Content-Type": "application/json"},
    )
    assert answer.status_code == 200, answer.text  # the vendor's answer: pushes are not retried
    assert _delivery(deployment, client, record) == state


@pytest.mark.parametrize("state_", ["delivered", "undelivered"])
@pytest.mark.parametrize(("record", "state"), RECORDS, ids=[r[0] for r in RECORDS])
def test_a_signed_sandbox_receipt_moves_no_record_the_sandbox_did_not_send(
    deployment: Deployment, client: httpx.Client, record: str, state: object, state_: str
) -> None:
    content = json.dumps([{"msgid": f"sandbox-{deployment.ids[record]}", "state": state_}]).encode()
    headers = {
        "Content-Type": "application/json",
        "X-Sandbox-Signature": sign_receipt(deployment.keys["vendor"], content),
    }
    answer = deployment.ask(client, "POST", "/v1/receipts/vendor", who=None, content=content, headers=headers)
    assert answer.status_code == 200, answer.text
    assert _delivery(deployment, client, record) == state


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/notifications/"),
        ("POST", "/v1/notifications/"),
        ("GET", "/v1/events/"),
        ("GET", "/v1/signing-keys/"),
        ("GET", "/v1/health/"),
    ],
)
def test_a_trailing_slash_is_404_and_never_a_redirect_to_the_host_header(
    deployment: Deployment, client: httpx.Client, method: str, path: str
) -> None:
    with deployment.unchanged():
        answer = deployment.ask(client, method, path, headers={"Host": "evil.example"})
    assert answer.status_code == 404 and "location" not in answer.headers
