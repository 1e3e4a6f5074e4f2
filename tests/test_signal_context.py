"""The request context a batch worker pushes for a notification's signal receivers is the
one Celery's ``Context`` makes of the same fields (noti.celery.report fills it directly)."""

from __future__ import annotations

from typing import Any


def test_a_signal_context_is_the_one_celery_makes() -> None:
    from celery.app.task import Context

    from noti.celery.report import _context_of

    fields: dict[str, Any] = {"headers": None, "id": "a", "args": ["a"], "kwargs": {}, "retries": 2}
    fields |= {"root_id": "a", "parent_id": None, "hostname": "w@h", "delivery_info": {"routing_key": "q"}}
    fields["is_eager"] = False
    assert _context_of(fields).__dict__ == Context(**fields).__dict__
    fields.pop("headers")
    assert _context_of(fields).__dict__ == Context(**fields).__dict__
    custom = {**fields, "x_trace": "t"}  # a custom header: Celery's own way
    assert _context_of(custom).__dict__ == Context(**custom).__dict__ and _context_of(custom).headers == {
        "x_trace": "t"
    }
