"""The hostile-HTTP suite's helpers: the database digest, the refusal check, the secrets and
the leak scan. Fixtures are in ``conftest.py``; how to add cases is in ``__init__.py``.

**The digest** (:func:`digest`) fingerprints every key of the suite's Redis database (noti's
records, indexes, events, tokens, receipts, kombu's queues and bindings) by its type and
content and by ``PEXPIRETIME`` (its absolute expiry; Redis < 7: whether it has one). A case
compares the digest before and after its request: a refusal changes nothing. Hashes, sets and
sorted sets are read as their content (sorted fields, members, members with scores); the other
types by ``DUMP``. Not ``DUMP`` for those three: a hash or set held as a hash table (more than
128 entries, or one of over 64 bytes, such as ``noti:dlv:vid``'s ``<provider>:<SES message
id>``) dumps in its table's order, and a mere read (a rehash step) or Redis' own timer
(``activerehashing``) changes that order.
Exactly these legitimately change and are left out, each for its reason:

* on a refused request that carried a valid token: the token's ``used_ms`` (when it last
  authenticated, written at most once a second) and its rate bucket ``bt``/``bts`` (one
  request taken: a rate limit must count refused requests too, or it is no limit). Token
  hashes are read field by field for this (``HGETALL`` less those fields); nothing else of a
  token may change.
* by themselves while a worker runs, whatever is asked: the workers' heartbeats
  (``noti:workers``), lease locks (``noti:lock:*``: the delayed pump's, the event
  processor's), kombu's restore mutex (``unacked_mutex``) and the event processor's start
  marker (``noti:events:starting``). These are the same keys ``tests/test_hostile_input.py``
  leaves out; none of them holds anything a request could write.

``DUMP`` needs no ``DEBUG`` command, so the digest works on any Redis
(``NOTI_TEST_REDIS_URL`` too).

**Secrets** (:class:`Secrets`) are every credential the fixtures configured: the API tokens
(revoked ones too), the webhook providers' ``whsec_`` secrets (and their base64 keys) and
secret header values, the receipt keys and vendor credentials. Each answer the suite's
clients receive is scanned as it arrives (the case that got it fails), and at the end of the
package every answer again and every log file the run wrote (``noti serve`` with its access
log, the worker): one secret anywhere fails the run.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import redis

__all__ = [
    "BACKGROUND_PREFIXES",
    "TOKEN_USE_FIELDS",
    "AnswerLog",
    "Secrets",
    "assert_refused",
    "bearer",
    "changes",
    "digest",
    "error_of",
]

#: Fields of a token's hash a refused request may write (see the module docstring).
TOKEN_USE_FIELDS = frozenset({b"used_ms", b"bt", b"bts"})
#: Keys that change by themselves while a worker runs (see the module docstring).
BACKGROUND_PREFIXES = (
    "noti:workers",
    "noti:lock:",
    "unacked_mutex",
    "noti:events:starting",
    "_kombu.binding_deadlines",
)
#: Where tokens live (:mod:`noti.access.tokens`, default key prefix).
TOKEN_KEY_PREFIX = "noti:token:"


def digest(client: redis.Redis) -> dict[str, str]:
    """A fingerprint of every key of ``client``'s database, by key name (non-UTF-8 names
    shown with backslash escapes), less what the module docstring lists. Two digests are
    equal when nothing a request could write has changed."""
    keys = sorted(
        key
        for key in client.scan_iter(count=1000)
        if not key.decode(errors="backslashreplace").startswith(BACKGROUND_PREFIXES)
    )
    if not keys:
        return {}
    expiry = "PEXPIRETIME" if _has_pexpiretime(client) else "PTTL"
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.type(key)
    types = [_text(t) for t in pipe.execute()]
    for key, kind in zip(keys, types, strict=True):
        if kind == "hash":
            pipe.hgetall(key)
        elif kind == "set":
            pipe.smembers(key)
        elif kind == "zset":
            pipe.zrange(key, 0, -1, withscores=True)
        else:
            pipe.dump(key)
        pipe.execute_command(expiry, key)  # type: ignore[no-untyped-call]
    replies = pipe.execute()
    out: dict[str, str] = {}
    for n, key in enumerate(keys):
        value, expires, kind = replies[2 * n], replies[2 * n + 1], types[n]
        if kind == "none" or value is None:  # gone between the scan and the read (an expiry)
            continue
        if kind == "hash":  # of a token, the fields but the ones a request may touch
            token = key.startswith(TOKEN_KEY_PREFIX.encode())
            value = repr(sorted((k, v) for k, v in value.items() if not (token and k in TOKEN_USE_FIELDS)))
        elif kind in ("set", "zset"):
            value = repr(sorted(value))
        value = kind.encode() + b"\0" + (value.encode() if isinstance(value, str) else value)
        if expiry == "PTTL":  # a countdown: only whether there is one is stable
            expires = int(expires) > 0
        out[key.decode(errors="backslashreplace")] = hashlib.sha256(value).hexdigest()[:16] + f"/{expires}"
    return out


_PEXPIRETIME: dict[int, bool] = {}


def _has_pexpiretime(client: redis.Redis) -> bool:
    found = _PEXPIRETIME.get(id(client))
    if found is None:
        version = str(client.info("server").get("redis_version", "0"))
        found = _PEXPIRETIME[id(client)] = int(version.split(".")[0]) >= 7
    return found


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def changes(before: Mapping[str, str], after: Mapping[str, str]) -> dict[str, str]:
    """Keys created, removed or changed between two digests."""
    out = {k: "created" for k in after.keys() - before.keys()}
    out.update({k: "removed" for k in before.keys() - after.keys()})
    out.update({k: "changed" for k in before.keys() & after.keys() if before[k] != after[k]})
    return out


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def error_of(response: httpx.Response) -> tuple[int, str]:
    """The status and the stable code of an error answer; fails unless the body is noti's
    error shape ``{"error": {"code": "e.…", "message": "…", …}}`` (:mod:`noti.http.statuses`)."""
    try:
        body = response.json()
    except ValueError:
        raise AssertionError(f"HTTP {response.status_code}: not JSON: {response.text[:300]!r}") from None
    assert isinstance(body, dict) and set(body) == {"error"}, body
    error = body["error"]
    assert isinstance(error.get("code"), str) and error["code"].startswith("e."), body
    assert isinstance(error.get("message"), str) and error["message"].strip(), body
    return response.status_code, error["code"]


def assert_refused(response: httpx.Response, status: int, code: str) -> None:
    """``response`` is the refusal ``status`` with the stable ``code`` in noti's error body
    (and, for a 401, the ``WWW-Authenticate`` challenge RFC 6750 asks for)."""
    got = error_of(response)
    assert got == (status, code), (
        f"{response.request.method} {response.request.url}: {got}: {response.text[:500]}"
    )
    if status == 401:
        assert response.headers.get("WWW-Authenticate", "").startswith("Bearer"), response.headers
    assert "Traceback" not in response.text


@dataclass
class Secrets:
    """Every secret the fixtures configured, by a name that says what it is."""

    values: dict[str, str] = field(default_factory=dict)

    def add(self, name: str, value: str) -> str:
        assert len(value) >= 12, f"{name}: too short to be told apart from ordinary text"
        self.values[name] = value
        if value.startswith("whsec_"):  # the key alone, as a careless log might print it
            self.values[f"{name} (key)"] = value[len("whsec_") :]
        return value

    def found_in(self, text: str) -> list[str]:
        """The names of the secrets ``text`` contains."""
        return [name for name, value in self.values.items() if value in text]

    def __iter__(self) -> Any:
        return iter(self.values.values())


@dataclass
class AnswerLog:
    """Every answer the suite's clients received (status, headers and body as text, under the
    request that got it), each checked for secrets as it arrives (:meth:`hook`, an httpx
    response hook). What a case sent is not scanned: a case may send a secret on purpose."""

    secrets: Secrets
    answers: list[tuple[str, str]] = field(default_factory=list)

    def hook(self, response: httpx.Response) -> None:
        response.read()
        asked = _masked(f"{response.request.method} {response.request.url}", self.secrets)
        headers = "\n".join(f"{k}: {v}" for k, v in response.headers.items())
        seen = f"{response.status_code}\n{headers}\n{response.text}"
        self.answers.append((asked, seen))
        leaked = self.secrets.found_in(seen)
        assert not leaked, f"the answer to {asked} shows {leaked}"


def leaks(secrets: Secrets, answers: Iterable[tuple[str, str]], logs: Iterable[Path]) -> list[str]:
    """Where a secret shows: ``"<secret name> in <place>"`` for every answer (``(request,
    answer)`` pairs) and log file, the secrets themselves masked."""
    found = []
    for asked, answer in answers:
        found += [f"{name} in the answer to {asked}" for name in secrets.found_in(answer)]
    for path in logs:
        text = path.read_text(errors="replace") if path.exists() else ""
        for name in secrets.found_in(text):
            line = next(line for line in text.splitlines() if secrets.values[name] in line)
            found.append(f"{name} in {path.name}: {_masked(line, secrets)[:300]}")
    return found


def _masked(line: str, secrets: Secrets) -> str:
    """``line`` with the secrets in it replaced by their names (a report must not repeat them)."""
    for name, value in secrets.values.items():
        line = line.replace(value, f"<{name}>")
    return line


def id_free(text: str, *ids: str) -> str:
    """``text`` with each of ``ids`` replaced by ``<id>``: two answers about different ids
    compared as the same answer."""
    for one in ids:
        text = text.replace(one, "<id>")
    return re.sub(r"\s+", " ", text)


Check = Callable[[httpx.Response], None]
