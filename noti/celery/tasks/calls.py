"""A task message's arguments, bound to the call its task documents (``notify(type, target,
…)``, ``dispatch(name, payload=None, user=None)``): a message of another shape (a foreign
``send_task`` with no type, a keyword twice, extra positional arguments) is refused with the
task's own error code instead of failing with Python's ``TypeError``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from noti.errors import InvalidInput

__all__ = ["bind_call"]

T = TypeVar("T")


def bind_call(
    shape: Callable[..., T],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    *,
    task: str,
    takes: str,
    code: str,
) -> T:
    """``shape(*args, **kwargs)``: ``shape`` has the task's documented parameters and returns them.

    Raises:
        InvalidInput: with ``code``: the arguments do not bind; the message names ``task`` and
            what it ``takes``.
    """
    try:
        return shape(*args, **kwargs)
    except TypeError as exc:
        message = str(exc).replace(f"{shape.__name__}()", task)
        raise InvalidInput(f"{message}: {task} takes {takes}", code=code) from None
