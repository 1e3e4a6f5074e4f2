"""Recipients: notify people, not addresses (issue 34).

::

    from noti import recipients

    recipients.put("42", {"addresses": {"sms": "+8613912345678", "email": "ada@example.com"},
                          "locale": "zh-Hant-TW", "timezone": "Asia/Taipei"})
    recipients.put_template("order_shipped", {"default_locale": "en", "channels": {
        "sms": {"en": {"text": "Order {{ order }} shipped"}, "zh": {"text": "订单 {{ order }} 已发货"}}}})
    recipients.set_preferences("42", {"marketing": {"*": False}})
    notice_id = noti.notify(recipient="42", template="order_shipped", data={"order": 7},
                            category="orders")

=================================  ===========================================================
module                             owns
=================================  ===========================================================
:mod:`~noti.recipients.profile`    a recipient's profile and its checks
:mod:`~noti.recipients.categories` message categories (defaults per channel, opt-out, critical)
:mod:`~noti.recipients.store`      profiles and preferences in Redis, bulk import, erasure
:mod:`~noti.recipients.importing`  reading CSV and JSON lines for the import
:mod:`~noti.recipients.locales`    locale tags and their fallback
:mod:`~noti.recipients.quiet`      quiet hours in the recipient's timezone
:mod:`~noti.recipients.templates`  named, versioned templates per channel and locale
:mod:`~noti.recipients.notices`    the one-call notify (``notify.lua`` decides atomically)
:mod:`~noti.recipients.unsubscribe` signed one-click unsubscribe links
:mod:`~noti.recipients.api`        the operations with the permission rules
=================================  ===========================================================

The functions below act for ``user`` (default ``NOTI_USER``) on this process's runtime, as
:mod:`noti.api` does. (``list_categories`` and ``get_notice`` are not named ``categories``
and ``notice``: those are submodules, and importing one would replace the function.)
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "delete",
    "delete_category",
    "delete_template",
    "get",
    "get_template",
    "history",
    "get_notice",
    "import_rows",
    "list_categories",
    "list_recipients",
    "list_templates",
    "merge",
    "notify",
    "notify_many",
    "preferences",
    "put",
    "put_category",
    "put_template",
    "set_preferences",
    "update",
]


def _api() -> Any:
    from noti.recipients.api import recipients

    return recipients()


def put(rid: str | None, profile: object, **kwargs: Any) -> Any:
    """Create or replace a profile: ``(profile, created?)``."""
    return _api().put(rid, profile, **kwargs)


def get(rid: str, **kwargs: Any) -> Any:
    return _api().get(rid, **kwargs)


def update(rid: str, patch: object, **kwargs: Any) -> Any:
    """Apply a JSON merge patch (RFC 7396) to a profile."""
    return _api().update(rid, patch, **kwargs)


def merge(into: str, source: str, **kwargs: Any) -> Any:
    return _api().merge(into, source, **kwargs)


def delete(rid: str, **kwargs: Any) -> Any:
    """Erase a recipient (the right to be forgotten)."""
    return _api().delete(rid, **kwargs)


def list_recipients(**kwargs: Any) -> Any:
    return _api().list_recipients(**kwargs)


def import_rows(rows: Any, **kwargs: Any) -> Any:
    return _api().import_rows(rows, **kwargs)


def history(rid: str, **kwargs: Any) -> Any:
    return _api().history(rid, **kwargs)


def preferences(rid: str, **kwargs: Any) -> Any:
    return _api().preferences(rid, **kwargs)


def set_preferences(rid: str, prefs: object, **kwargs: Any) -> Any:
    return _api().set_preferences(rid, prefs, **kwargs)


def list_categories() -> Any:
    return _api().categories()


def put_category(name: str, declaration: object, **kwargs: Any) -> Any:
    return _api().put_category(name, declaration, **kwargs)


def delete_category(name: str, **kwargs: Any) -> Any:
    return _api().delete_category(name, **kwargs)


def put_template(name: str, doc: object, **kwargs: Any) -> Any:
    return _api().put_template(name, doc, **kwargs)


def get_template(name: str, **kwargs: Any) -> Any:
    return _api().get_template(name, **kwargs)


def list_templates(**kwargs: Any) -> Any:
    return _api().list_templates(**kwargs)


def delete_template(name: str, **kwargs: Any) -> Any:
    return _api().delete_template(name, **kwargs)


def notify_many(items: Any, **kwargs: Any) -> Any:
    """Many notices, each refused alone: a :class:`~noti.recipients.bulk.NoticeBatch`."""
    return _api().notify_many(items, **kwargs)


def notify(**kwargs: Any) -> Any:
    """Notify a recipient from a template; the :class:`~noti.recipients.notices.Notice`."""
    return _api().notify(**kwargs)


def get_notice(notice_id: str, **kwargs: Any) -> Any:
    return _api().notice(notice_id, **kwargs)
