"""The error tree and its codes are a contract: pin them."""

from __future__ import annotations

import noti
from noti import errors


def test_every_error_descends_from_noti_error_with_its_code() -> None:
    expected = {
        "InvalidConfig": (errors.NotiError, "e.noti.config"),
        "IncompatibleDependency": (errors.InvalidConfig, "e.noti.config.dependency"),
        "InvalidInput": (errors.NotiError, "e.cmd.noti.add.invalid"),
        "PermissionDenied": (errors.NotiError, "e.cmd.noti.nopvg"),
        "NotFound": (errors.NotiError, "e.cmd.noti.not_found"),
        "StoreUnavailable": (errors.NotiError, "e.noti.store.unavailable"),
        "DeliveryError": (errors.NotiError, "e.noti.delivery"),
        "TemporaryFailure": (errors.DeliveryError, "e.noti.delivery.temporary"),
        "RateLimited": (errors.TemporaryFailure, "e.noti.delivery.ratelimited"),
        "ProviderOutage": (errors.TemporaryFailure, "e.noti.delivery.outage"),
        "StaleCredential": (errors.TemporaryFailure, "e.noti.delivery.credential"),
        "AmbiguousOutcome": (errors.TemporaryFailure, "e.noti.delivery.ambiguous"),
        "UnconfirmedOutcome": (errors.AmbiguousOutcome, "e.noti.delivery.unconfirmed"),
        "PermanentFailure": (errors.DeliveryError, "e.noti.delivery.permanent"),
        "RecipientOptedOut": (errors.PermanentFailure, "e.noti.delivery.optedout"),
        "ProviderMisconfigured": (errors.DeliveryError, "e.noti.delivery.config"),
        "RetriesExhausted": (errors.NotiError, "e.cmd.noti.send.reachMaxRetry"),
        "PoolError": (errors.NotiError, "e.noti.pool"),
        "TransitionRefused": (errors.PoolError, "e.noti.pool.refused"),
        "NoFreeNumber": (errors.PoolError, "e.noti.pool.empty"),
        "BridgeError": (errors.NotiError, "e.noti.bridge"),
        "MalformedMessage": (errors.BridgeError, "e.noti.bridge.malformed"),
        "ReceiptRejected": (errors.NotiError, "e.noti.receipt"),
        "Unauthenticated": (errors.NotiError, "e.noti.auth"),
        "Unsubscribed": (errors.PermanentFailure, "e.noti.delivery.unsubscribed"),
        "RateLimitExceeded": (errors.NotiError, "e.noti.auth.rate"),
    }
    assert sorted(errors.__all__) == sorted([*expected, "NotiError"])
    for name, (parent, code) in expected.items():
        cls = getattr(errors, name)
        assert cls.__bases__ == (parent,), name
        assert cls.code == code, name
        assert cls.__doc__, name


def test_errors_print_code_then_message_and_accept_a_specific_code() -> None:
    error = errors.PermissionDenied("no", code="e.cmd.noti.del.nopvg")
    assert str(error) == "e.cmd.noti.del.nopvg: no"
    assert error.message == "no"
    limited = errors.RateLimited("slow down", retry_after_s=2.5, provider="p", vendor_code="X")
    assert limited.retry_after_s == 2.5 and limited.provider == "p" and limited.vendor_code == "X"


def test_public_api_is_pinned() -> None:
    assert sorted(noti.__all__) == sorted(
        [
            "Channel",
            "DeliveryError",
            "InvalidConfig",
            "InvalidInput",
            "NotFound",
            "NotiError",
            "Notification",
            # NOTI_HANDLERS' base class and its answer (docs/concepts/dead-letters.md)
            "NotificationHandler",
            "STOP",
            "PermanentFailure",
            "PermissionDenied",
            "RateLimited",
            "RetriesExhausted",
            "Status",
            "StoreUnavailable",
            "TemporaryFailure",
            "cancel",
            "clean",
            "configure",
            "delete",
            "get",
            "get_notice",
            "list_notifications",
            "notify",
            "notify_chat",
            "notify_email",
            "notify_many",
            "notify_push",
            "notify_sms",
            "notify_webhook",
            "notify_weixin",
            "revoke",
            "schedule_many",
            # what happened to a notification (docs/concepts/history.md)
            "search",
            "send",
            "timeline",
        ]
    )
    for name in noti.__all__:
        assert getattr(noti, name) is not None
