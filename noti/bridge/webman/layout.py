"""Names and Redis keys of a webman queue, derived from the PHP class that owns it (layout.md §3).

These keys are dictated by the PHP plugin, not by noti: they carry the webman connection's
prefix (``webman_redis_queue_`` by default), never ``NOTI_KEY_PREFIX``. For the class
``app\\queue\\test\\SendEmail`` and the default prefix:

=======================  ===============================================================
queue name (``type``)    ``app-queue-test-sendemail``
group                    ``app_queue_test_sendemail``
stream                   ``webman_redis_queue_app_queue_test_sendemail``
delayed ZSET             ``webman_redis_queue_app_queue_test_sendemail_delayed_tasks``
delayed HASH             ``webman_redis_queue_app_queue_test_sendemail_delayed_data``
pending-check lock       ``webman_redis_queue_app_queue_test_sendemail-0_read_pending_messages``
noti's mover lock        ``webman_redis_queue_app_queue_test_sendemail_delayed_tasks:noti-mover``
=======================  ===============================================================

The pending-check lock is the one PHP's worker 0 takes, so a noti check and a PHP check never
overlap. The mover lock is noti's own: PHP's mover takes none (its script is atomic), so the
identical script run by noti is safe next to it, and the lock only keeps noti's workers from
running one mover per thread.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "QueueKeys",
    "QueueNames",
    "class_name_for_queue",
    "group_name",
    "namespace_for_path",
    "noti_consumer_name",
    "php_consumer_name",
    "php_strtolower",
    "queue_name",
]

_ASCII_UPPER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_QUEUE_ARG = re.compile(r"^[a-zA-Z-]+$")


def php_strtolower(text: str) -> str:
    """PHP 8.2 ``strtolower``: ASCII letters only, whatever the locale."""
    return text.translate(_ASCII_UPPER)


def queue_name(php_class: str) -> str:
    """``strtolower(trim(str_replace('\\\\', '-', C), '-'))``: the ``type`` field."""
    return php_strtolower(php_class.replace("\\", "-").strip("-"))


def group_name(php_class: str) -> str:
    """``strtolower(trim(str_replace('\\\\', '_', C), '_'))``: the group, and the base of the keys."""
    return php_strtolower(php_class.replace("\\", "_").strip("_"))


def php_consumer_name(group: str, worker_id: int) -> str:
    """The consumer name PHP worker ``worker_id`` uses: ``<group>-<id>``."""
    return f"{group}-{worker_id}"


def noti_consumer_name(group: str, host: str, pid: int, tag: str) -> str:
    """A noti consumer name: ``<group>-noti-<host>-<pid>-<tag>`` (``tag``: the thread's role).

    After ``<group>-`` it never holds only digits, so it never equals a PHP ``<group>-<n>``.
    """
    safe_host = re.sub(r"[^A-Za-z0-9.]+", "_", host) or "host"
    return f"{group}-noti-{safe_host}-{pid}-{tag}"


def class_name_for_queue(name: str) -> str:
    """``solar:make:consumer``'s class name for a queue name: ``send-code`` → ``SendCode``.

    Raises:
        ValueError: the name is not letters and dashes (the plugin's own rule).
    """
    if not _QUEUE_ARG.match(name):
        raise ValueError(f"queue name {name!r} may only hold letters and '-'")
    return "".join(part[:1].upper() + part[1:] for part in name.split("-"))


def namespace_for_path(path: str) -> str:
    """The PHP namespace of a class directory: ``app/queue/test`` → ``app\\queue\\test``."""
    return "\\".join(part for part in re.split(r"[\\/]+", path.strip()) if part and part != ".")


@dataclass(frozen=True, slots=True)
class QueueNames:
    """The five names of a queue (before the prefix) and the PHP class they come from."""

    php_class: str
    queue: str
    group: str
    stream: str
    delayed_set: str
    delayed_hash: str

    @classmethod
    def from_class(
        cls,
        php_class: str,
        *,
        queue_name_: str = "",
        group_name_: str = "",
        stream_key: str = "",
        delayed_task_set_key: str = "",
        delayed_data_hash_key: str = "",
    ) -> QueueNames:
        """Derive the names as ``Consumer::__construct`` does; an override is used verbatim.

        The other names never follow an override: with ``stream_key="test"`` the group is
        still derived from the class.
        """
        group = group_name(php_class)
        return cls(
            php_class=php_class,
            queue=queue_name_ or queue_name(php_class),
            group=group_name_ or group,
            stream=stream_key or group,
            delayed_set=delayed_task_set_key or f"{group}_delayed_tasks",
            delayed_hash=delayed_data_hash_key or f"{group}_delayed_data",
        )


@dataclass(frozen=True, slots=True)
class QueueKeys:
    """The Redis keys of one queue under one connection prefix."""

    names: QueueNames
    prefix: str

    @property
    def stream(self) -> str:
        return self.prefix + self.names.stream

    @property
    def delayed_set(self) -> str:
        return self.prefix + self.names.delayed_set

    @property
    def delayed_hash(self) -> str:
        return self.prefix + self.names.delayed_hash

    @property
    def pending_lock(self) -> str:
        """PHP worker 0's pending-check lock (``<consumer>_read_pending_messages``)."""
        return f"{self.prefix}{php_consumer_name(self.names.group, 0)}_read_pending_messages"

    @property
    def mover_lock(self) -> str:
        """noti's lock for moving this queue's due tasks (one noti mover per queue)."""
        return f"{self.delayed_set}:noti-mover"

    @property
    def data_keys(self) -> tuple[str, str, str]:
        """What the plugin's clean command deletes, in its order: HASH, ZSET, stream."""
        return (self.delayed_hash, self.delayed_set, self.stream)
