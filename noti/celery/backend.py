"""The Celery result backend of noti: task states read from noti's own records.

``result_backend = "noti.celery.backend:RecordBackend"``. A notification's state already
lives in its record (``noti_st``, the lease, the attempts), so the backend reads it instead
of storing a second copy: no extra Redis write per notification, and a state that can never
disagree with the record. Two kinds of task id are answered:

* **a record id** (the task id of its ``noti.deliver`` messages)::

    no record                                     PENDING
    waiting, never attempted (or waiting its time) PENDING
    waiting, a sender holds its lease now          STARTED
    waiting after >= 1 failed attempt              RETRY    (TemporaryFailure: last error)
    done (10)                                      SUCCESS  {"id", "provider", "msgid", "delivery",
                                                            "delivery_at"[, "delivery_code"]}
    failed (0)                                     FAILURE  RetriesExhausted (or the class
                                                            its errmsg's code names)
    invalid (-1)                                   FAILURE  PermanentFailure (likewise)
    invalid with ``noti_revoked_at``               REVOKED  TaskRevokedError

* **a ``noti.notify`` task id**: the key ``noti:task:<id>`` (the task's idempotency key,
  written with the record by ``create.lua``) names the record it created → SUCCESS, result =
  the record id. A task that failed (bad input: nothing stored) or was revoked left its
  failure in ``noti:task:<id>:failed``, written once, on failure only, with the time-to-live
  ``result_expires``. Neither key → PENDING.

Failures are stored in Celery's JSON form ``{exc_type, exc_message, exc_module}`` plus
``exc_code``, so ``.get()`` raises noti's own class (``noti.errors.InvalidInput``) with its
stable code (``str(exc)`` is ``"code: message"``). Callers poll (``get()`` looks every
``interval``, 0.5 s by default); each look is one round trip.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from celery import states
from celery.backends.base import BaseBackend

from noti.celery.queues import DELIVER_TASK
from noti.core.record import Channel, Status, msgid_field, msgid_fields, now_ms
from noti.core.retry import error_for
from noti.errors import (
    NotiError,
)
from noti.redis.outage import translate_errors
from noti.sending.runtime import get_runtime

__all__ = ["INTAKE_TASK", "RecordBackend", "record_meta"]

#: The intake task, whose results are ``noti:task:<id>`` keys (the other tasks' are records).
INTAKE_TASK = "noti.notify"
#: Hash field the revocation change sets (epoch ms) on a revoked record, with status -1.
REVOKED_FIELD = "noti_revoked_at"

_FIELDS_BEFORE_MSGIDS = (
    "noti_type",
    "noti_st",
    "noti_timeout_at",
    "_owner",
    "noti_retry",
    "noti_errmsg",
    "noti_sent_by",
    "lm",
    REVOKED_FIELD,
    "noti_dlv",
    "noti_dlv_at",
    "noti_dlv_code",
)


def _fields() -> tuple[str, ...]:
    """The record fields a task meta is read from (the message ids: every channel's)."""
    return (*_FIELDS_BEFORE_MSGIDS, *msgid_fields())


def error_meta(exc_class: type[NotiError], message: str, code: str | None = None) -> dict[str, Any]:
    """Celery's JSON form of an exception, plus noti's code."""
    return {
        "exc_type": exc_class.__qualname__,
        "exc_module": exc_class.__module__,
        "exc_message": [message],
        "exc_code": code or exc_class.code,
    }


def _error_from_errmsg(status: Status, errmsg: str) -> dict[str, Any]:
    """The Celery error meta of a record's stored failure (:func:`noti.core.retry.error_for`)."""
    error = error_for(status, errmsg)
    return error_meta(type(error), error.message, error.code)


def record_meta(record_id: str, row: Sequence[str | None], at_ms: int) -> dict[str, Any]:
    """The Celery task meta of a record, from the values of ``_fields()`` (see the module)."""
    data = dict(zip(_fields(), row, strict=True))
    status = Status(int(data["noti_st"] or 1))
    modified_ms = int(data["lm"] or 0)
    date_done = datetime.fromtimestamp(modified_ms / 1000, UTC).isoformat() if modified_ms else None
    if status is Status.DONE:
        channel = Channel(str(data["noti_type"]))
        result = {
            "id": record_id,
            "provider": data["noti_sent_by"],
            "msgid": data[msgid_field(channel)],
            "delivery": data["noti_dlv"],
            "delivery_at": int(data["noti_dlv_at"]) if data["noti_dlv_at"] else None,
        }
        if data["noti_dlv_code"]:
            result["delivery_code"] = data["noti_dlv_code"]
        return {"status": states.SUCCESS, "result": result, "date_done": date_done}
    errmsg = data["noti_errmsg"] or ""
    if status is Status.INVALID and data[REVOKED_FIELD]:
        revoked = {
            "exc_type": "TaskRevokedError",
            "exc_module": "celery.exceptions",
            "exc_message": [errmsg or "revoked"],
        }
        return {"status": states.REVOKED, "result": revoked, "date_done": date_done}
    if status is Status.FAILED:
        return {"status": states.FAILURE, "result": _error_from_errmsg(status, errmsg)}
    if status is Status.INVALID:
        return {"status": states.FAILURE, "result": _error_from_errmsg(status, errmsg)}
    if data["_owner"] and int(data["noti_timeout_at"] or 0) > at_ms:
        return {"status": states.STARTED, "result": None}
    if int(data["noti_retry"] or 0) >= 1:
        return {"status": states.RETRY, "result": _error_from_errmsg(Status.WAITING, errmsg)}
    return {"status": states.PENDING, "result": None}


class RecordBackend(BaseBackend):  # type: ignore[misc]
    """A read-only result backend over noti's records (see the module). Writes nothing for a
    record; writes one short-lived key when a ``noti.notify`` task fails or is revoked."""

    #: Its keys expire by themselves and records are cleaned by noti's own beat job, so
    #: beat adds no ``celery.backend_cleanup`` entry.
    supports_autoexpire = True

    def __init__(self, app: Any, url: str | None = None, **kwargs: Any) -> None:
        super().__init__(app, url=url, **kwargs)

    # --- reading ----------------------------------------------------------------------------

    def _get_task_meta_for(self, task_id: str) -> dict[str, Any]:
        runtime = get_runtime()
        keys, client = runtime.keys, runtime.redis
        with translate_errors(client):
            pipe = client.pipeline(transaction=False)
            pipe.hmget(keys.record(task_id), list(_fields()))
            pipe.mget([keys.task(task_id), keys.task_failure(task_id)])
            row, (created, failed) = pipe.execute()
        if row[0] is not None:  # noti_type: a record has this id
            meta = record_meta(task_id, row, now_ms())
        elif created:
            meta = {"status": states.SUCCESS, "result": created}
        elif failed:
            meta = json.loads(failed)
        else:
            meta = {"status": states.PENDING, "result": None}
        meta.setdefault("task_id", task_id)
        return self.meta_from_decoded(meta)  # type: ignore[no-any-return]

    def exception_to_python(self, exc: Any) -> Any:
        """Celery's conversion, then noti's code put back on a :class:`NotiError`."""
        found = super().exception_to_python(exc)
        if isinstance(found, NotiError) and isinstance(exc, Mapping) and exc.get("exc_code"):
            found.code = str(exc["exc_code"])
        return found

    def prepare_exception(self, exc: BaseException, serializer: str | None = None) -> Any:
        """Celery's JSON form, plus ``exc_code`` for a :class:`NotiError` (its message alone
        would rebuild it with its class's default code)."""
        prepared = super().prepare_exception(exc, serializer)
        if isinstance(exc, NotiError) and isinstance(prepared, dict):
            prepared["exc_message"] = [exc.message]
            prepared["exc_code"] = exc.code
        return prepared

    # --- writing ----------------------------------------------------------------------------

    def _store_result(
        self,
        task_id: str,
        result: Any,
        state: str,
        traceback: str | None = None,
        request: Any = None,
        **kwargs: Any,
    ) -> Any:
        """Record a ``noti.notify`` failure or revoke (nothing else: a success is the key its
        record was created with, and a record's state is the record)."""
        name = getattr(request, "task", None) if request is not None else None
        if state in states.PROPAGATE_STATES and name in (INTAKE_TASK, None):
            runtime = get_runtime()
            meta = {"status": state, "result": result, "traceback": traceback, "task_id": task_id}
            ttl_s = int(self.expires) if self.expires else int(runtime.settings.idempotency_ttl_s)
            with translate_errors(runtime.redis):
                runtime.redis.set(runtime.keys.task_failure(task_id), json.dumps(meta), ex=max(1, ttl_s))
        return result

    def mark_as_revoked(
        self,
        task_id: str,
        reason: str = "",
        request: Any = None,
        store_result: bool = True,
        state: str = states.REVOKED,
    ) -> None:
        """A revoked ``noti.deliver`` message or record id goes to :meth:`revoke_record`; a
        revoked ``noti.notify`` task (or an id that names no record) is stored as Celery does."""
        name = getattr(request, "task", None) if request is not None else None
        if name == DELIVER_TASK or (name is None and self._is_record(task_id)):
            self.revoke_record(task_id, reason=reason, request=request)
            return
        super().mark_as_revoked(task_id, reason, request=request, store_result=store_result, state=state)

    def revoke_record(self, record_id: str, *, reason: str = "", request: Any = None) -> None:
        """Revoke a waiting notification's record (:meth:`~noti.core.store.RecordStore.revoke`):
        invalid (-1) with ``noti_revoked_at``, which :func:`record_meta` reports as REVOKED. A
        record another worker is sending is left to it."""
        get_runtime().store.revoke([record_id], reason=reason or "revoked")

    def _is_record(self, task_id: str) -> bool:
        runtime = get_runtime()
        with translate_errors(runtime.redis):
            return bool(runtime.redis.exists(runtime.keys.record(task_id)))
