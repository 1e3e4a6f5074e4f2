"""What a listener does with an event: create a notification from templates, or call a
Celery task.

``NotifyAction`` renders its target and fields (Jinja2 templates, see
:mod:`noti.events.templates`) from the payload and adds one notification as the listener's
owner, with an idempotency key made of the event id and the listener id: a processor that
resumes an event never creates its notification twice.

A listener acts for whom it may: for an event another user dispatched (one its owner opted
in to, :attr:`~noti.events.listeners.Listener.from_users`), the notification is made with the
lesser rights of the two. Its level is capped at the lower of the two users' caps, and it
must be one the event's sender could make themselves (built as the sender first, storing
nothing: the providers they may name and use, and every other check ``add`` makes), so a
user's payload never borrows a root member's level or providers.

``TaskAction`` calls a registered Celery task in the processor, in event order, with one
argument, the event: ``{"id", "name", "user", "payload", "created_ms", "listener", "key",
"owner", "level_cap"}`` (``user`` dispatched it, ``owner`` owns the listener, ``level_cap``
is the lower of their caps: a task that makes notifications for the event should make
them as ``user``, or within ``level_cap``).
Its return value (made JSON-safe) is kept in the event's return data. The call is
at-least-once: a processor killed during it calls it again on resume, with the same
``key`` (also the task's ``request.id``), so a task that must not repeat can deduplicate on
it. Listener tasks must be registered in noti's app: define them with ``@shared_task`` (or
``@app.task`` of noti's app, ``noti.celery.app.app``) in a module named in ``NOTI_IMPORTS``,
which the CLI, the API and the workers import (``celery -A noti worker -I myapp.listeners``
works for the worker alone). noti's and Celery's own tasks are refused.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from noti.core.door import through
from noti.core.record import Channel, check_field_names, parse_channel, parse_level
from noti.errors import InvalidInput, NotiError, StoreUnavailable
from noti.events.event import Outcome
from noti.events.templates import ADD_PREFIX, CompiledTemplate, compile_template
from noti.imports import import_modules

if TYPE_CHECKING:
    from noti.sending.notifier import Notifier

__all__ = [
    "Action",
    "CompiledAction",
    "CompiledNotify",
    "CompiledTask",
    "NotifyAction",
    "RunContext",
    "TaskAction",
    "check_example",
    "compile_action",
    "find_task",
    "parse_action",
]

log = logging.getLogger(__name__)

#: Task name prefixes a listener may not call: noti's own tasks and Celery's.
RESERVED_TASK_PREFIXES = ("noti.", "celery.")
TASK_RESULT_MAX_BYTES = 8 * 1024


@dataclass(frozen=True, slots=True)
class NotifyAction:
    """Create one notification: ``target`` and every field are templates.

    ``fields`` are the channel's (``text`` for sms; ``subject``, ``text``, ``html`` for email;
    ``tmpl``, ``pnb``, ``url``, ``content`` for weixin; ``content`` for webhook). A
    ``content`` object's string values are templates too.
    """

    type: Channel
    target: str
    fields: Mapping[str, Any] = field(default_factory=dict)
    lv: int = 1
    provider: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "notify",
            "type": self.type.value,
            "target": self.target,
            "fields": dict(self.fields),
            "lv": self.lv,
            "provider": self.provider,
        }

    def describe(self) -> str:
        return f"{self.type.value} to {self.target}"


@dataclass(frozen=True, slots=True)
class TaskAction:
    """Call the Celery task ``task`` with the event."""

    task: str

    def to_json(self) -> dict[str, Any]:
        return {"kind": "task", "task": self.task}

    def describe(self) -> str:
        return f"task {self.task}"


Action = NotifyAction | TaskAction


def _bad(message: str) -> InvalidInput:
    return InvalidInput(message, code="e.noti.listener.badaction")


def parse_action(action: object) -> Action:
    """An action from what callers pass: an action object; a task name; or a mapping,
    either ``{"task": NAME}`` or a notification template
    ``{"type": "sms", "target": "{{ customer.phone }}", "text": "Order {{ id }} paid", "lv": 5}``
    (the stored form ``{"kind": "notify", …, "fields": {…}}`` is accepted too).

    Raises:
        InvalidInput: ``e.noti.listener.badaction``, ``e.cmd.noti.add.badtype``,
        ``e.cmd.noti.add.badfield`` / ``.missing`` / ``.badlv``.
    """
    if isinstance(action, NotifyAction | TaskAction):
        return action
    if isinstance(action, str):
        return TaskAction(action)
    if not isinstance(action, Mapping):
        raise _bad(
            f"a listener action is a task name or a notification template, got {type(action).__name__}"
        )
    spec = dict(action)
    kind = spec.pop("kind", None)
    if kind == "task" or (kind is None and "task" in spec):
        if set(spec) != {"task"}:
            raise _bad(f"a task action takes only 'task', got {', '.join(sorted(spec))}")
        return TaskAction(spec["task"])
    if kind not in (None, "notify"):
        raise _bad(f"unknown action kind {kind!r} (known: notify, task)")
    kind_name = spec.pop("type", None)
    if not isinstance(kind_name, str):
        raise _bad("a notification template needs its 'type' (sms, weixin, email, webhook)")
    channel = parse_channel(kind_name)
    target = spec.pop("target", spec.pop("to", None))
    if target is None:
        raise _bad("a notification template needs its 'target' (e.g. '{{ customer.phone }}')")
    lv = parse_level(spec.pop("lv", 1))
    provider = spec.pop("provider", None)
    if provider is not None and (not isinstance(provider, str) or not provider.strip()):
        raise InvalidInput("provider must be a non-empty name", code="e.cmd.noti.add.noprovider")
    fields = dict(spec.pop("fields", None) or {})
    fields.update(spec)
    fields = {k: v for k, v in fields.items() if v is not None}
    check_field_names(channel, fields)
    return NotifyAction(channel, target, fields, lv, provider.strip() if provider else None)


# --- compiled actions, run by the processor ---------------------------------------------------


def _compile_tree(value: Any, where: str) -> Any:
    if isinstance(value, str):
        return compile_template(value, where)
    if isinstance(value, Mapping):
        return {k: _compile_tree(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [_compile_tree(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if value is None or isinstance(value, bool | int | float):
        return value
    raise InvalidInput(
        f"{where}: templates are strings, objects and lists, got {type(value).__name__}",
        code="e.noti.listener.badtemplate",
    )


def _render_tree(tree: Any, values: Mapping[str, Any], prefix: str) -> Any:
    if isinstance(tree, CompiledTemplate):
        return tree.render(values, prefix=prefix)
    if isinstance(tree, dict):
        return {k: _render_tree(v, values, prefix) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_render_tree(v, values, prefix) for v in tree]
    return tree


def _variables(tree: Any) -> set[str]:
    if isinstance(tree, CompiledTemplate):
        return set(tree.variables)
    if isinstance(tree, dict):
        return set().union(*(_variables(v) for v in tree.values())) if tree else set()
    if isinstance(tree, list):
        return set().union(*(_variables(v) for v in tree)) if tree else set()
    return set()


@functools.cache
def _import_task_modules(modules: tuple[str, ...]) -> None:
    from noti.celery.app import app

    import_modules(modules)
    app.loader.import_default_modules()


def find_task(name: str) -> Any | None:
    """The task called ``name`` in this process's noti app, or None. The modules of
    ``NOTI_IMPORTS`` are imported first (once).

    Raises:
        InvalidConfig: ``e.noti.config.imports``: one of them cannot be imported.
    """
    from noti.celery.app import app
    from noti.sending.runtime import get_runtime

    _import_task_modules(tuple(get_runtime().settings.imports))
    return app.tasks.get(name)


def _json_safe(value: Any) -> Any:
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return {"repr": repr(value)[:1000]}
    if len(text.encode()) > TASK_RESULT_MAX_BYTES:
        return {"truncated": text[:1000]}
    return value


@dataclass(frozen=True, slots=True)
class RunContext:
    """One listener's view of one event."""

    event_id: str
    name: str
    user: str
    payload: Mapping[str, Any]
    created_ms: int
    listener_name: str
    owner: str
    #: ``event:<event id>:<listener id>``: the notification's idempotency key, the task's id.
    key: str
    #: The highest level the listener may give what it makes for this event: the lower of
    #: its owner's and the event's sender's caps (the lowest cap when not given).
    level_cap: int = 1


@dataclass(frozen=True, slots=True)
class CompiledNotify:
    """A :class:`NotifyAction` with its templates compiled."""

    action: NotifyAction
    target: CompiledTemplate
    fields: Mapping[str, Any]

    @property
    def variables(self) -> set[str]:
        return _variables(self.target) | _variables(dict(self.fields))

    def render(self, values: Mapping[str, Any], *, prefix: str) -> tuple[str, dict[str, Any]]:
        """The rendered target and fields.

        Raises:
            InvalidInput: a template failed (see :meth:`CompiledTemplate.render`).
        """
        target = self.target.render(values, prefix=prefix)
        return target, {k: _render_tree(v, values, prefix) for k, v in self.fields.items()}

    def run(self, run: RunContext, values: Mapping[str, Any], notifier: Notifier) -> Outcome:
        """Make the notification as the listener's owner, at most at ``run.level_cap``; for
        another user's event, only one that user could make themselves.

        Raises:
            InvalidInput, PermissionDenied: refused (recorded as the listener's outcome).
        """
        target, fields = self.render(values, prefix="e.noti.event.template")
        action = self.action
        if run.user != run.owner:
            # the lesser of the two: what the sender may not make, the listener may not make
            # for them (a provider only the owner may name or use, ...); stores nothing
            notifier.build(
                action.type.value, target, lv=action.lv, user=run.user, provider=action.provider, **fields
            )
        with through("events"):
            record = notifier.add(
                action.type.value,
                target,
                lv=action.lv,
                user=run.owner,
                level_cap=run.level_cap,
                provider=action.provider,
                idempotency_key=run.key,
                **fields,
            )
        return Outcome(run.listener_name, notification=record.id)


@dataclass(frozen=True, slots=True)
class CompiledTask:
    """A :class:`TaskAction`, checked."""

    action: TaskAction

    @property
    def variables(self) -> set[str]:
        return set()

    def run(self, run: RunContext, values: Mapping[str, Any], notifier: Notifier) -> Outcome:
        name = self.action.task
        task = find_task(name)
        if task is None:
            return Outcome(
                run.listener_name,
                task=name,
                error_code="e.noti.event.task.unknown",
                error_message=f"no task {name!r} is registered in this worker (name its module in"
                " NOTI_IMPORTS)",
            )
        event = {
            "id": run.event_id,
            "name": run.name,
            "user": run.user,
            "payload": dict(run.payload),
            "created_ms": run.created_ms,
            "listener": run.listener_name,
            "key": run.key,
            "owner": run.owner,
            "level_cap": run.level_cap,
        }
        result = task.apply(args=[event], task_id=run.key, throw=False)
        if result.state != "SUCCESS":
            exc = result.result
            if isinstance(exc, StoreUnavailable):
                raise exc
            if isinstance(exc, NotiError):
                return Outcome(run.listener_name, task=name, error_code=exc.code, error_message=exc.message)
            return Outcome(
                run.listener_name,
                task=name,
                error_code="e.noti.event.task.failed",
                error_message=f"{type(exc).__name__}: {exc}" if isinstance(exc, BaseException) else str(exc),
            )
        return Outcome(run.listener_name, task=name, result=_json_safe(result.result))


CompiledAction = CompiledNotify | CompiledTask


def compile_action(action: Action, *, check_task: bool = True) -> CompiledAction:
    """Compile ``action``'s templates, or check its task.

    Raises:
        InvalidInput: ``e.noti.listener.badtemplate`` / ``.unsafe`` (a template),
        ``e.noti.listener.notask`` (a reserved or, with ``check_task``, unknown task).
    """
    if isinstance(action, TaskAction):
        name = action.task
        if not isinstance(name, str) or not name.strip() or len(name) > 200:
            raise InvalidInput("a task name is 1-200 characters", code="e.noti.listener.notask")
        if name.startswith(RESERVED_TASK_PREFIXES):
            raise InvalidInput(
                f"{name!r} is one of noti's or Celery's own tasks; a listener may not call it",
                code="e.noti.listener.notask",
            )
        if check_task and find_task(name) is None:
            raise InvalidInput(
                f"no Celery task {name!r} is registered: define it with @shared_task in a module"
                " named in NOTI_IMPORTS (imported by the CLI, the API and the workers)",
                code="e.noti.listener.notask",
            )
        return CompiledTask(action)
    target = compile_template(action.target, "target")
    fields = {k: _compile_tree(v, f"field {k!r}") for k, v in action.fields.items()}
    return CompiledNotify(action, target, fields)


def check_example(
    compiled: CompiledAction, values: Mapping[str, Any], notifier: Notifier, owner: str
) -> None:
    """Render ``compiled`` against an example payload and validate the notification it would
    create, storing nothing.

    Raises:
        InvalidInput: ``e.noti.listener.undefined`` / ``.unsafe`` / ``.error``, or the
        notification's own ``e.cmd.noti.add.*`` codes.
    """
    if not isinstance(compiled, CompiledNotify):
        return
    target, fields = compiled.render(values, prefix=ADD_PREFIX)
    action = compiled.action
    notifier.build(action.type.value, target, lv=action.lv, user=owner, provider=action.provider, **fields)
