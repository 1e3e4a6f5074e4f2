"""Provider selection: failover, shared rate limits, opt-outs, `noti providers`."""

from __future__ import annotations

import json
from typing import Any

import pytest

import noti
from noti.core.record import Status
from noti.errors import InvalidConfig
from tests.conftest import ADMIN, sandbox_outbox, wait_until
from tests.test_cli import run

PHONE = "+8613912345678"


@pytest.mark.slow
def test_no_more_than_the_configured_rate_reaches_the_provider(configure: Any, worker: Any) -> None:
    # given a provider limited to 5 requests per second (bucket of 1) and 25 records at once
    rt = configure(providers={"slowvendor": {"kind": "sandbox", "rate_limit_per_s": 5, "rate_burst": 1}})
    ids = [noti.notify_sms(PHONE, f"m{i}", provider="slowvendor", user=ADMIN) for i in range(25)]
    wait_until(lambda: all(rt.store.get(i).status is Status.DONE for i in ids), timeout=60)
    # then in every 1-second window the provider saw at most rate + burst requests
    times = sorted(entry["at"] for entry in sandbox_outbox(rt, "slowvendor"))
    assert len(times) == 25
    for start in times:
        in_window = sum(1 for t in times if start <= t < start + 1000)
        assert in_window <= 6, (in_window, times)
    # and the whole batch took at least (25 - burst) / rate seconds
    assert times[-1] - times[0] >= (25 - 1) / 5 * 1000 - 300
    assert all(rt.store.get(i).retry == 0 for i in ids)  # waiting for the limit is not an attempt


def test_an_exhausted_rate_limit_fails_over_to_the_next_provider(configure: Any) -> None:
    rt = configure(
        providers={
            "limited": {"kind": "sandbox", "rate_limit_per_s": 0.01, "rate_burst": 1},
            "spare": {"kind": "sandbox"},
        }
    )
    first = noti.notify_sms(PHONE, "a", provider="limited,spare")
    second = noti.notify_sms(PHONE, "b", provider="limited,spare")
    noti.send(first)
    noti.send(second)
    assert rt.store.get(first).sent_by == "limited"
    assert rt.store.get(second).sent_by == "spare"


def test_a_throttled_last_provider_postpones_without_counting(configure: Any) -> None:
    rt = configure(providers={"limited": {"kind": "sandbox", "rate_limit_per_s": 0.01, "rate_burst": 1}})
    noti.send(noti.notify_sms(PHONE, "a", provider="limited"))
    second = noti.notify_sms(PHONE, "b", provider="limited")
    [result] = noti.send(second)
    record = rt.store.get(second)
    assert result.status is Status.WAITING and record.retry == 0
    assert rt.delayed.due_at(second) is not None


def test_an_opted_out_recipient_is_suppressed_for_the_channel(configure: Any) -> None:
    from noti.errors import RecipientOptedOut

    rt = configure(providers={"optout": {"kind": "tests.broken_provider:OptedOutProvider"}})
    first = noti.notify_sms(PHONE, "a", provider="optout")
    noti.send(first)
    assert rt.store.get(first).status is Status.INVALID
    [letter] = rt.dead_letters.entries()
    assert letter.error_class == "opted_out"
    # later notifications to the same target are not even sent to a provider
    second = noti.notify_sms(PHONE, "b")
    noti.send(second)
    record = rt.store.get(second)
    assert record.status is Status.INVALID and record.errmsg.startswith(RecipientOptedOut.code)
    assert sandbox_outbox(rt) == []
    denied = run("dead", "unsuppress", "sms", PHONE)
    assert denied.exit_code == 1 and "e.cmd.noti.dead.nopvg" in denied.stderr
    assert run("dead", "unsuppress", "sms", PHONE, user=ADMIN).stdout == f"sms {PHONE}: opt-out lifted\n"
    third = noti.notify_sms(PHONE, "c")
    noti.send(third)
    assert rt.store.get(third).status is Status.DONE


def test_noti_providers_lists_kinds_and_configured_instances_with_secrets_masked(configure: Any) -> None:
    configure(
        providers={"main": {"kind": "sandbox", "rate_limit_per_s": 3}, "broken": {"kind": "nosuch"}},
        channels={"sms": {"provider": "main,sandbox"}},
    )
    table = run("providers").stdout
    assert "sandbox" in table and "main" in table and "rate_limit_per_s=3.0" in table
    data = json.loads(run("providers", "-json").stdout)
    kinds = {k["kind"]: k for k in data["kinds"]}
    assert kinds["sandbox"]["status"] == "ok" and "sms" in kinds["sandbox"]["channels"]
    configured = {c["name"]: c for c in data["configured"]}
    assert configured["main"]["default_for"] == "sms" and configured["main"]["status"] == "ok"
    assert configured["broken"]["status"].startswith(
        "e.noti.config: [providers.broken] kind: unknown provider kind 'nosuch'"
    )


def test_noti_providers_json_shows_a_weixin_providers_accounts_with_secrets_masked(configure: Any) -> None:
    configure(
        providers={
            "wx": {"kind": "weixin", "accounts": {"main": {"appid": "wx0123", "secret": "s3cret-value"}}}
        },
        channels={"weixin": {"provider": "wx"}},
    )
    out = run("providers", "-json").stdout
    assert "s3cret-value" not in out
    [wx] = [c for c in json.loads(out)["configured"] if c["name"] == "wx"]
    assert wx["status"] == "ok"
    assert wx["options"]["accounts"] == {"main": {"appid": "wx0123", "secret": "**********"}}
    table = run("providers").stdout
    assert "wx0123" in table and "s3cret-value" not in table


@pytest.mark.parametrize(
    ("name", "table", "names"),
    [
        (
            "tw",
            {"kind": "twilio", "account_sid": "AC123", "auth_token": "t", "from": "+15005550006"},
            "account_sid",
        ),
        ("tw", {"kind": "twilio", "account_sid": "AC" + "0" * 32, "auth_token": "t"}, "'from'"),
        ("ali", {"kind": "aliyun", "access_key_id": "k"}, "access_key_secret: Field required"),
        ("ali", {"kind": "sandbox", "no_such_option": 1}, "no_such_option: unknown option"),
        ("wx", {"kind": "weixin", "accounts": {"a": {"appid": "x"}}}, "accounts.a.secret"),
        ("odd", {"kind": "nosuch"}, "kind: unknown provider kind"),
        ("odd", {"kind": 7}, "kind: must be a string"),
    ],
)
def test_a_bad_provider_table_is_refused_naming_the_provider_and_the_key(
    configure: Any, name: str, table: dict[str, Any], names: str
) -> None:
    rt = configure(providers={name: table})
    with pytest.raises(InvalidConfig) as caught:
        rt.providers.get(name)
    assert caught.value.code == "e.noti.config"
    assert f"[providers.{name}]" in caught.value.message and names in caught.value.message
    assert "  is invalid" not in str(caught.value) and "Value error" not in caught.value.message
