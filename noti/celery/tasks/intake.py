"""``noti.notify``: create a notification from a task message.

Applications with noti installed call ``noti.tasks.notify.delay(type="sms", target=…,
text=…)``; those that only know the task name::

    celery_app.send_task("noti.notify", queue="noti.intake",
                         kwargs={"type": "sms", "target": "+8613912345678", "text": "hi"})

**Results** (:mod:`noti.celery.backend`): ``.get()`` returns the record id, or raises
:class:`~noti.errors.InvalidInput` (code in the message) for bad input.

**Call options** of ``apply_async`` (also taken as ``.delay()`` keywords): the intake
message always goes out at once and the worker stores the notification, so no Celery ETA
message is ever held in worker memory.

* ``countdown`` (seconds) / ``eta`` (a datetime; naive = UTC, the app's timezone) become the
  notification's own ``eta``: the record waits in noti's delayed set. Bad values, both
  together, or together with the ``delay``/``eta`` fields are refused at once
  (:class:`~noti.errors.InvalidInput`, ``e.cmd.noti.add.baddelay``).
* ``priority`` (0-9, 0 served first) is the intake message's priority step and, when the
  call gives no ``lv``, the notification's level: the lowest level of that step (0 → 1000,
  3 → 100, 9 → 1; :func:`~noti.celery.queues.level_for_priority`), lowered to the user's cap
  as any level. With an ``lv`` and no ``priority``, the message takes the level's step.
* ``expires`` is Celery's: an intake message no worker started by then is discarded
  (REVOKED, nothing stored). It bounds the intake, not the delivery; an ``expires`` at or
  before the notification's due time is refused (``e.cmd.noti.add.badexpires``).

**Privacy**: unless ``NOTI_MASK_IN_CELERY=false``, the call's ``argsrepr``/``kwargsrepr``
(what worker logs, task events, Flower and ``inspect`` show) carry the target masked
(``+86139****5678``) and the bodies as their length (``<23 chars>``), and the target is
masked in the task's failure message.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from celery import Task
from celery.utils.saferepr import saferepr
from kombu.exceptions import EncodeError

from noti.celery.app import app
from noti.celery.queues import PRIORITY_STEPS, level_for_priority, priority_for_level
from noti.celery.tasks.calls import bind_call
from noti.core.delay import due_ms
from noti.core.door import through
from noti.core.privacy import mask_target
from noti.core.record import now_ms, parse_level
from noti.errors import InvalidInput, NotFound, NotiError, PermissionDenied, StoreUnavailable
from noti.inputs import finite_number, shown
from noti.redis.outage import translate_errors
from noti.sending.runtime import get_runtime

__all__ = ["IntakeTask", "call_options", "masked_reprs", "notify"]

#: Celery call options that ``.delay()`` also takes as keywords (no channel field has these names).
_OPTION_KEYWORDS = ("countdown", "expires", "priority")
#: Fields shown as their length only: message bodies, links and a notice's template ``data``
#: (each may carry personal data).
_BODY_FIELDS = frozenset({"text", "html", "subject", "content", "url", "body", "title", "data"})
_REPR_MAX = 1024


class _Length:
    """Stands for a masked body in a repr: ``<23 chars>``."""

    def __init__(self, value: object) -> None:
        if isinstance(value, str):
            self.size = len(value)
        else:
            try:
                self.size = len(json.dumps(value, ensure_ascii=False))
            except (TypeError, ValueError, RecursionError):  # the worker refuses it
                self.size = len(shown(value))

    def __repr__(self) -> str:
        return f"<{self.size} chars>"


def masked_reprs(args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[str, str]:
    """``(argsrepr, kwargsrepr)`` of a ``noti.notify`` call: the target masked, the bodies
    as their length, the rest as Celery shows it."""
    shown_args = list(args)
    if len(shown_args) > 1 and isinstance(shown_args[1], str):
        shown_args[1] = mask_target(shown_args[1])
    shown: dict[str, Any] = {}
    for name, value in kwargs.items():
        if name == "target" and isinstance(value, str):
            shown[name] = mask_target(value)
        elif name in _BODY_FIELDS and value is not None:
            shown[name] = _Length(value)
        else:
            shown[name] = value
    return saferepr(tuple(shown_args), _REPR_MAX), saferepr(shown, _REPR_MAX)


def _aware(eta: object) -> object:
    """A naive datetime in the app's timezone (UTC); anything else as given (due_ms checks)."""
    if isinstance(eta, str):
        try:
            eta = datetime.fromisoformat(eta)
        except ValueError:
            message = f"eta {shown(eta)} is not an ISO 8601 time"
            raise InvalidInput(message, code="e.cmd.noti.add.baddelay") from None
    if isinstance(eta, datetime) and eta.tzinfo is None:
        return eta.replace(tzinfo=UTC)
    return eta


def _priority(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= PRIORITY_STEPS[-1]:
        raise InvalidInput(
            f"priority must be an integer from 0 (most urgent) to {PRIORITY_STEPS[-1]}, got {shown(value)}",
            code="e.cmd.noti.add.badpriority",
        )
    return value


def _expires_ms(expires: object, at_ms: int) -> int:
    if isinstance(expires, datetime):
        aware = expires.replace(tzinfo=UTC) if expires.tzinfo is None else expires
        return int(aware.timestamp() * 1000)
    if isinstance(expires, (int, float)) and not isinstance(expires, bool):
        seconds = finite_number(expires, what="expires (seconds)", code="e.cmd.noti.add.badexpires")
        return at_ms + int(seconds * 1000)
    raise InvalidInput(
        f"expires must be seconds or a datetime, got {shown(expires)}", code="e.cmd.noti.add.badexpires"
    )


def call_options(
    args: Sequence[Any], kwargs: Mapping[str, Any], options: Mapping[str, Any], *, mask: bool
) -> tuple[tuple[Any, ...], dict[str, Any], dict[str, Any]]:
    """The task arguments and Celery options a ``noti.notify`` call is published with (see
    the module): countdown/eta moved into the notification's ``eta``, priority and level
    matched, expires checked, the reprs masked.

    Raises:
        InvalidInput: a bad or conflicting countdown, eta, priority or expires.
    """
    call_kwargs = dict(kwargs)
    opts = dict(options)
    for name in _OPTION_KEYWORDS:
        if name in call_kwargs:
            if opts.get(name) is not None:
                raise InvalidInput(
                    f"{name} given twice: as a keyword and as a call option", code="e.cmd.noti.add.baddelay"
                )
            opts[name] = call_kwargs.pop(name)
    now = now_ms()
    countdown, eta = opts.pop("countdown", None), opts.pop("eta", None)
    due = 0
    if countdown is not None or eta is not None:
        if countdown is not None and eta is not None:
            raise InvalidInput("give countdown or eta, not both", code="e.cmd.noti.add.baddelay")
        if call_kwargs.get("delay") is not None or call_kwargs.get("eta") is not None:
            raise InvalidInput(
                "give countdown/eta as call options or delay/eta as notification fields, not both",
                code="e.cmd.noti.add.baddelay",
            )
        due = due_ms(delay=countdown, eta=_aware(eta), now_ms=now)
        if due:
            call_kwargs["eta"] = datetime.fromtimestamp(due / 1000, UTC)
    given_level = args[2] if len(args) > 2 else call_kwargs.get("lv")
    if opts.get("priority") is not None:
        opts["priority"] = _priority(opts["priority"])
        if given_level is None:
            call_kwargs["lv"] = level_for_priority(opts["priority"])
    elif given_level is not None:
        try:
            opts["priority"] = priority_for_level(parse_level(given_level))
        except InvalidInput:
            pass  # the worker refuses the level with its own code
    if opts.get("expires") is not None and _expires_ms(opts["expires"], now) <= max(due, now):
        raise InvalidInput(
            "expires is at or before the notification is due: it would never be sent",
            code="e.cmd.noti.add.badexpires",
        )
    if mask:
        argsrepr, kwargsrepr = masked_reprs(args, call_kwargs)
        opts.setdefault("argsrepr", argsrepr)
        opts.setdefault("kwargsrepr", kwargsrepr)
    return tuple(args), call_kwargs, opts


class IntakeTask(Task):
    """``noti.notify``'s task class: maps Celery's call options onto noti's (see the module)."""

    def apply_async(
        self,
        args: Sequence[Any] | None = None,
        kwargs: Mapping[str, Any] | None = None,
        task_id: str | None = None,
        producer: Any = None,
        link: Any = None,
        link_error: Any = None,
        shadow: str | None = None,
        **options: Any,
    ) -> Any:
        """Celery's ``apply_async`` with noti's call options (see the module).

        Raises:
            InvalidInput: a bad call option (:func:`call_options`), or arguments a Celery
            message cannot carry (a set, an object, JSON nested deeper than Python encodes:
            ``e.cmd.noti.add.baditem``), refused here, in the caller; nothing is sent.
        """
        call_args, call_kwargs, opts = call_options(
            args or (), kwargs or {}, options, mask=get_runtime().settings.mask_in_celery
        )
        try:
            return super().apply_async(
                call_args, call_kwargs, task_id, producer, link, link_error, shadow, **opts
            )
        except (EncodeError, RecursionError) as exc:  # a set, an object, JSON nested too deep
            raise InvalidInput(
                f"the call cannot be sent as a Celery message: {type(exc).__name__}: {exc}",
                code="e.cmd.noti.add.baditem",
            ) from None


@app.task(
    base=IntakeTask,
    name="noti.notify",
    bind=True,
    acks_late=True,
    ignore_result=False,
    throws=(InvalidInput, NotFound, PermissionDenied),
    max_retries=12,
)
def notify(self: Task, /, *args: Any, **kwargs: Any) -> str:
    """Validate, store and queue one notification; the new record id. Or, called with
    ``recipient=`` (``notify.delay(recipient="42", template=…, data=…)``), make a notice
    (:mod:`noti.recipients`); its id.

    Called as ``notify(type, target, lv=1, user=None, **fields)``; a message of another
    shape (no ``type``, a ``type`` given twice, extra positional arguments: what a producer
    that only knows the task name may send) fails with :class:`~noti.errors.InvalidInput`
    (``e.cmd.noti.add.baditem``), like any other bad input, rather than a ``TypeError``.

    The task id is the notification's idempotency key (``noti:task:<id>``, unless the caller
    gives an identifier or a key of its own), so a message redelivered after a worker crash
    creates nothing twice, and the same key answers the task's result. Bad input fails the
    task with :class:`~noti.errors.InvalidInput` (nothing is stored). A ``countdown`` field
    (from a producer that only knows the task name) is the notification's ``delay``. When Redis
    does not answer, the task is tried again in 5 s, up to 12 times (as ``noti.deliver``), so
    an outage loses no notification; the task id keeps a retry from storing it twice.
    """
    type, target, lv, user, fields = _call(args, kwargs)  # noqa: A001
    runtime = get_runtime()
    if "countdown" in fields and fields.get("delay") is None:
        fields["delay"] = fields.pop("countdown")
    make: Callable[[dict[str, Any]], str]
    if fields.get("recipient") is not None:  # a notice: notify.delay(recipient=…, template=…)
        if type is not None or target is not None:
            raise InvalidInput(
                "notify a recipient with a template, or a type and a target, not both",
                code="e.cmd.noti.notify.both",
            )
        from noti.recipients.api import recipients

        own_key = fields.get("idempotency_key") is not None
        make = lambda given: recipients().notify_id(lv=lv, user=user, **given)  # noqa: E731
    else:
        from noti.celery.process import process_notifier

        own_key = fields.get("identifier") is not None or fields.get("idempotency_key") is not None
        make = lambda given: process_notifier().notify(type, target, lv=lv, user=user, **given)  # noqa: E731
    if not own_key:
        fields["task_id"] = self.request.id
    try:
        with through("task"):
            made = make(fields)
    except StoreUnavailable as exc:
        raise self.retry(exc=exc, countdown=5) from exc
    except NotiError as exc:
        if runtime.settings.mask_in_celery:
            _mask_in_message(exc, target)
        raise
    if own_key and self.request.id:
        # made under the caller's key: name it for the task's result too
        ttl_ms = int(runtime.settings.idempotency_ttl_s * 1000)
        with translate_errors(runtime.redis):
            runtime.redis.set(runtime.keys.task(self.request.id), made, px=ttl_ms)
    return made


def _shape(
    type: object = None,  # noqa: A002
    target: object = None,
    lv: object = 1,
    user: object = None,
    **fields: Any,
) -> tuple[Any, Any, object, Any, dict[str, Any]]:
    return type, target, lv, user, fields


def _call(args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[Any, Any, object, Any, dict[str, Any]]:
    """The arguments of a ``noti.notify`` message, bound as the task documents them.

    Raises:
        InvalidInput: ``e.cmd.noti.add.baditem``: they do not bind (the message is not a call
        of ``notify(type, target, lv=1, user=None, **fields)``).
    """
    return bind_call(
        _shape,
        args,
        kwargs,
        task="noti.notify",
        takes="(type, target, lv=1, user=None, **fields)",
        code="e.cmd.noti.add.baditem",
    )


def _mask_in_message(exc: NotiError, target: object) -> None:
    """Mask ``target`` where the message of ``exc`` quotes it (``'+1' is not a phone number``)."""
    if not isinstance(target, str) or not target.strip():
        return
    message = exc.message
    for quoted in {target, target.strip()}:
        message = message.replace(quoted, mask_target(quoted.strip()))
    if message != exc.message:
        exc.message = message
        exc.args = (message, *exc.args[1:])
