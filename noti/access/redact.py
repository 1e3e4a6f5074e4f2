"""Credentials kept out of logs: :func:`redact` for a text, :func:`install` for every log
record a process makes.

What a log must never show, wherever it comes from (uvicorn's access and error logs, noti's
own loggers, the Celery worker's):

- a query or form value whose name ends in ``key``, ``token``, ``secret`` or ``password``
  (``?key=…`` of an Aliyun or Tencent receipt URL, ``?access_token=…`` a client added, an
  ``api_key=``): the value becomes ``***``;
- the key segment of a receipt URL, ``/v1/receipts/<provider>/<key>``;
- an API token (``noti_…``) or a webhook signing secret (``whsec_…``) anywhere in the text;
- the value of an ``Authorization`` header (``Bearer …``, ``Basic …``).

:func:`install` wraps the process's log record factory, so every record is redacted when it is
made, before any handler or formatter of any library sees it (a filter on some handlers would
miss the handlers added later, and Python's last-resort handler). A record whose message holds
nothing to hide is left as it was (one regular expression search over the message); one that
does keeps its arguments when redacting them one by one gives the same text (uvicorn's access
formatter unpacks its arguments), else its message becomes the redacted text. A traceback is
rendered and redacted at once.

It imports nothing of noti, so every layer may use it (as :mod:`noti.core.privacy`).
"""

from __future__ import annotations

import logging
import re
import threading
import traceback
from typing import Any

__all__ = ["MASK", "install", "installed", "redact"]

#: What a hidden value is replaced with.
MASK = "***"

#: ``name=value`` where the name ends in key, token, secret or password (query strings, form
#: bodies, ``key=value`` log fields); the value runs to the next separator.
_PARAM = re.compile(
    r"(?i)(?<![A-Za-z0-9])([A-Za-z0-9_.-]*(?:key|token|secret|password))=([^&\s\"'<>;,)\]}]+)"
)
#: The key segment of ``/v1/receipts/<provider>/<key>``.
_RECEIPT_PATH = re.compile(r"(/v1/receipts/[^/\s?#\"']+/)([^/\s?#\"']+)")
#: An API token or a webhook signing secret, wherever it stands.
_TOKEN = re.compile(r"\b(noti_|whsec_)[A-Za-z0-9_+/=-]{6,}")
#: An ``Authorization`` header's value, or a bare ``Bearer …`` / ``Basic …`` credential.
_AUTHORIZATION = re.compile(r"(?i)(authorization[\"']?\s*[:=,]\s*[\"']?)[^\"'\r\n]+")
_SCHEME = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}")
#: One search that finds whether any of the above may be present (the common case: none).
_ANY = re.compile(
    r"(?i)key=|token=|secret=|password=|/v1/receipts/|noti_|whsec_|authorization|bearer |basic "
)


def redact(text: str) -> str:
    """``text`` with every credential the module docstring lists replaced by ``***``."""
    if not _ANY.search(text):
        return text
    text = _PARAM.sub(rf"\1={MASK}", text)
    text = _RECEIPT_PATH.sub(rf"\1{MASK}", text)
    text = _TOKEN.sub(rf"\1{MASK}", text)
    text = _AUTHORIZATION.sub(rf"\1{MASK}", text)
    return _SCHEME.sub(rf"\1 {MASK}", text)


def _redact_arg(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if value is None or isinstance(value, int | float):
        return value
    text = str(value)
    hidden = redact(text)
    return value if hidden == text else hidden


def _redact_record(record: logging.LogRecord) -> None:
    """Redact ``record`` in place (see the module docstring)."""
    if record.exc_info and not record.exc_text:
        record.exc_text = redact("".join(traceback.format_exception(*record.exc_info)).rstrip("\n"))
    if record.stack_info:
        record.stack_info = redact(record.stack_info)
    try:
        message = record.getMessage()
    except Exception:  # a broken format: logging reports it when the record is handled
        return
    hidden = redact(message)
    if hidden == message:
        return
    args = record.args
    if isinstance(args, tuple) and isinstance(record.msg, str):
        record.msg, record.args = redact(record.msg), tuple(_redact_arg(a) for a in args)
        try:
            if record.getMessage() == hidden:
                return
        except Exception:  # the redacted arguments no longer fit the format: use the text
            pass
    record.msg, record.args = hidden, ()


_lock = threading.Lock()
_installed = False


def installed() -> bool:
    """Whether this process's log records are redacted (:func:`install` ran here)."""
    return _installed


def install() -> None:
    """Redact every log record this process makes from now on (once per process; a forked
    child inherits it, a spawned one calls it again)."""
    global _installed
    with _lock:
        if _installed:
            return
        made = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = made(*args, **kwargs)
            _redact_record(record)
            return record

        logging.setLogRecordFactory(factory)
        _installed = True
