"""What the chat providers share: the operator's robots, the message a record asks for, each
conversation's own rate line, and reading a vendor's answer.

**Robots.** A group robot (DingTalk, Feishu, WeCom, a Slack incoming webhook) is reached by a
URL that is its credential, sometimes with a signing secret. Both are the operator's: they
live in the provider's ``robots`` table (robot name -> ``token`` and ``secret``, both
secret), and a record's target only *names* a robot. A user never gives a token, a URL or a
secret (docs/guarantees.md, Security), and an unknown name is refused at ``add``
(``e.cmd.noti.add.badtarget``) without listing the configured ones.

**The message.** A chat record has ``text``, an optional one-line ``title`` and ``format``
``text`` or ``markdown`` (:class:`Content`); each provider maps them to its vendor's message
types and checks its vendor's size limit at ``add`` (``e.cmd.noti.add.badtext``).

**Rate lines per conversation.** Vendors limit each robot or chat (DingTalk and WeCom: 20
messages a minute per robot; Feishu: 5 a second and 100 a minute; Slack: about one a second
per channel; Telegram: 20 a minute per group), and one provider reaches many of them, so the
provider's own line (``rate_limit_per_s``, shared by the whole account) cannot hold them. Each
conversation gets a line of its own in :mod:`noti.providers.ratelimit`, named
``<provider>/<conversation>`` (``target_rate_per_min`` and ``target_burst``; 0 switches it
off): a send that finds no token raises :class:`~noti.errors.RateLimited` with the wait, so the
record waits without an attempt counted and without any request to the vendor. A bucket of
``b`` tokens filled at ``r`` a second lets at most ``b + r * T`` through in any ``T`` seconds,
so the defaults sit below each vendor's windows (20 a minute: ``19/min, burst 1``).

**Answers.** Robots answer HTTP 200 with a vendor code (0: posted):
:meth:`RobotProvider.coded_answer` reads one, :func:`coded_error` turns a code into its class
from the provider's ``ERRORS`` table, :func:`status_error` an HTTP status without one. None of
these vendors takes an idempotency key: a send that timed out after the request went out is
an :class:`~noti.errors.AmbiguousOutcome` and is sent again, so a group may see a message
twice.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar
from urllib.parse import parse_qs, urlsplit

import httpx
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, SecretStr, field_validator

from noti.core.record import Channel
from noti.errors import (
    AmbiguousOutcome,
    DeliveryError,
    InvalidInput,
    PermanentFailure,
    ProviderMisconfigured,
    RateLimited,
    TemporaryFailure,
)
from noti.providers import _http
from noti.providers.base import Message, Provider, ProviderOptions, Receipt
from noti.providers.ratelimit import RateLimiter

__all__ = [
    "ROBOT_NAME",
    "BaseUrl",
    "ChatOptions",
    "ChatProvider",
    "Content",
    "RobotOptions",
    "RobotProvider",
    "coded_error",
    "hmac_sha256_b64",
    "json_or_none",
    "no_code",
    "query_token",
    "robot_tokens",
    "status_error",
    "utf16_len",
]

log = logging.getLogger(__name__)

#: A robot's name: lower case, starting with a letter, so that it is never a Telegram chat id
#: (digits, ``-100…``, ``@name``) nor a Slack channel id (``C0123ABCD``).
ROBOT_NAME = re.compile(r"^[a-z][a-z0-9_.-]{0,63}$")
#: Shortest wait after a vendor's rate-limit answer (a wait is not an attempt: ``0`` would
#: send again at once, without end).
MIN_RATE_LIMIT_WAIT_S = 1.0


#: A vendor's API root option: http(s), no query, its trailing slash dropped.
BaseUrl = Annotated[str, Field(pattern=_http.BASE_URL), AfterValidator(lambda url: url.rstrip("/"))]


class RobotOptions(BaseModel):
    """One robot of the ``robots`` table: its webhook token (or key, or hook id) and its
    signing secret. Both are secret: they never print, and never come from a user."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    token: SecretStr = Field(min_length=1)
    secret: SecretStr | None = None


class ChatOptions(ProviderOptions):
    """Options every chat provider has (a vendor's subclass sets the defaults)."""

    #: Robot name -> its token and secret (the vendors that post through robots).
    robots: dict[str, RobotOptions] = Field(default_factory=dict, max_length=1000)
    #: Messages a minute each conversation (robot, channel, chat) may receive; 0: no line.
    target_rate_per_min: float = Field(default=0.0, ge=0, le=6000)
    #: Bucket size of each conversation's line.
    target_burst: int = Field(default=1, ge=1, le=100)

    @field_validator("robots")
    @classmethod
    def _robot_names(cls, value: dict[str, RobotOptions]) -> dict[str, RobotOptions]:
        for name in value:
            if not ROBOT_NAME.match(name):
                raise ValueError(
                    f"robot name {name[:70]!r}: lower case letters, digits, '_', '.', '-', "
                    "starting with a letter, at most 64"
                )
        return value


@dataclass(frozen=True, slots=True)
class Content:
    """What a chat record asks to post: its ``text``, ``title`` and ``format``."""

    text: str
    title: str = ""
    markdown: bool = False

    @classmethod
    def of(cls, message: Message) -> Content:
        fields = message.fields
        return cls(
            text=str(fields.get("text") or ""),
            title=str(fields.get("title") or ""),
            markdown=str(fields.get("format") or "text") == "markdown",
        )

    def plain(self) -> str:
        """The title (when there is one) on its own line above the text."""
        return f"{self.title}\n{self.text}" if self.title else self.text

    def first_line(self, limit: int) -> str:
        """The title, else the text's first non-empty line, cut to ``limit`` characters."""
        line = self.title or next((s.strip() for s in self.text.splitlines() if s.strip()), "")
        return line[:limit] or "noti"


def utf16_len(text: str) -> int:
    """``text``'s length in UTF-16 code units (how Telegram counts characters)."""
    return len(text.encode("utf-16-le")) // 2


class ChatProvider(Provider):
    """Base of the chat providers: checks at ``add``, each conversation's rate line, then the
    vendor's request (:meth:`post`)."""

    channels = frozenset({Channel.CHAT})
    Options: ClassVar[type[ProviderOptions]] = ChatOptions
    options: ChatOptions
    #: The vendor's answer is the message being in the conversation: no receipt follows.
    delivered_on_send = True
    #: The vendor's name in messages ("DingTalk").
    vendor: ClassVar[str] = ""

    def check(self, message: Message) -> None:
        """Raises InvalidInput: a target this provider cannot reach
        (``e.cmd.noti.add.badtarget``), or a message over its vendor's size limit
        (``e.cmd.noti.add.badtext``)."""
        self.check_target(message.target)
        problem = self.size_problem(Content.of(message))
        if problem:
            raise InvalidInput(f"{self.name}: {problem}", code="e.cmd.noti.add.badtext")

    def send(self, message: Message) -> Receipt:
        """Take the conversation's turn, then post; see the vendor module's table."""
        self._take_turn(message)
        return self.post(message, Content.of(message))

    # --- what a vendor's provider defines -----------------------------------------------------

    def check_target(self, target: str) -> None:
        """Raises InvalidInput (``e.cmd.noti.add.badtarget``) for a target it cannot reach."""
        raise NotImplementedError

    def size_problem(self, content: Content) -> str:
        """Why ``content`` is over the vendor's limits ("" when it is not)."""
        raise NotImplementedError

    def post(self, message: Message, content: Content) -> Receipt:
        """One request to the vendor: the receipt, or the error its answer stands for."""
        raise NotImplementedError

    def conversation(self, target: str) -> str:
        """What the vendor limits per conversation (the target, by default)."""
        return target

    # --- shared helpers ------------------------------------------------------------------------

    def _take_turn(self, message: Message) -> None:
        """Take a token of the conversation's line (see the module docstring).

        Raises:
            RateLimited: no token yet; ``retry_after_s`` is the wait.
            StoreUnavailable: Redis did not answer.
        """
        per_min = self.options.target_rate_per_min
        if not per_min:
            return
        line = f"{self.name}/{self.conversation(message.target)}"
        wait_s = RateLimiter(self.redis, self.keys).acquire(
            line,
            rate_per_s=per_min / 60,
            burst=self.options.target_burst,
            contender=message.id,
            level=message.level,
            user=message.creator,
            hold_s=0.0,
        )
        if wait_s > 0:
            raise RateLimited(
                f"{self.name}: this conversation takes {per_min:g} messages a minute; "
                f"next turn in {wait_s:.2f} s",
                retry_after_s=wait_s,
                provider=self.name,
                vendor_code="noti.target_rate",
            )

    def post_json(
        self,
        url: str,
        body: Mapping[str, Any],
        *,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """POST ``body`` as UTF-8 JSON (transport failures mapped by :mod:`noti.providers._http`)."""
        with _http.map_transport_errors(self.name):
            return _http.client().post(
                url,
                json=dict(body),
                params=dict(params or {}),
                headers={"content-type": "application/json; charset=utf-8", **(headers or {})},
                timeout=self.options.timeout_s,
            )

    def refused(self, message: Message, error: DeliveryError) -> DeliveryError:
        """Log a refusal once (no secret, the target masked) and return it to raise."""
        log.info(
            "%s %s: record %s to %s refused: %s",
            self.kind,
            self.name,
            message.id,
            mask(message.target),
            error.vendor_code,
        )
        return error


class RobotProvider(ChatProvider):
    """A chat provider whose targets are the operator's robots (its ``robots`` table)."""

    def check_target(self, target: str) -> None:
        if target not in self.options.robots:
            raise InvalidInput(
                f"{self.name}: no robot called {target[:64]!r} is configured for {self.vendor} "
                "(robots are named in the provider's robots table by the operator)",
                code="e.cmd.noti.add.badtarget",
            )

    def robot(self, target: str) -> RobotOptions:
        """The robot ``target`` names.

        Raises:
            ProviderMisconfigured: it was removed from the settings since the record was added.
        """
        robot = self.options.robots.get(target)
        if robot is None:
            raise ProviderMisconfigured(
                f"{self.name}: robot {target[:64]!r} is no longer configured",
                provider=self.name,
                vendor_code="noti.no_robot",
            )
        return robot

    def coded_answer(
        self,
        message: Message,
        response: httpx.Response,
        errors: Mapping[str, type[DeliveryError]],
        *,
        code: tuple[str, ...],
        text: tuple[str, ...],
        wait_s: float,
    ) -> Receipt:
        """The receipt of a robot's answer carrying code 0 with a 2xx, else the refusal it
        stands for, raised: :func:`no_code` without a code, else :func:`coded_error` from
        ``errors`` (a rate limit waiting ``wait_s``). ``code`` and ``text`` name the answer's
        fields holding the vendor code and its message; the first one present is read (Feishu
        spells them two ways).

        Raises:
            DeliveryError: the vendor refused, or the answer cannot be read.
        """
        data = json_or_none(response)
        found = None if data is None else _first(data, code, None)
        if found is None:
            raise self.refused(message, no_code(self.name, response))
        if str(found) == "0" and response.is_success:
            return Receipt(provider=self.name, msgid=None, raw=f"HTTP {response.status_code} {code[0]} 0")
        assert data is not None
        words = str(_first(data, text, ""))
        error = coded_error(self.name, errors, str(found), words, status=response.status_code, wait_s=wait_s)
        raise self.refused(message, error)


def _first(data: Mapping[str, Any], names: tuple[str, ...], default: Any) -> Any:
    """The value of the first of ``names`` that ``data`` has, else ``default``."""
    return next((data[name] for name in names if name in data), default)


def robot_tokens(value: Any, from_url: Callable[[str], str | None]) -> Any:
    """The ``robots`` table as given (before validation) with each ``token`` that ``from_url``
    finds a token in (the webhook URL the vendor shows) replaced by that token; ``from_url``
    returns None for a token that is not such a URL."""
    if not isinstance(value, dict):
        return value
    robots = {}
    for name, robot in value.items():
        token = robot.get("token") if isinstance(robot, dict) else None
        found = from_url(token) if isinstance(token, str) else None
        if found is not None:
            robot = {**robot, "token": found}
        robots[name] = robot
    return robots


def query_token(param: str) -> Callable[[str], str | None]:
    """A :func:`robot_tokens` reader for a webhook URL carrying the token as its query's
    ``param`` (the last one; "" when the URL has none)."""

    def from_url(token: str) -> str | None:
        return parse_qs(urlsplit(token).query).get(param, [""])[-1] if "://" in token else None

    return from_url


def hmac_sha256_b64(key: bytes, msg: bytes) -> str:
    """base64(HMAC-SHA256(``key``, ``msg``)): how the signing robots sign (each vendor chooses
    what is the key and what the message)."""
    return base64.b64encode(hmac.new(key, msg, hashlib.sha256).digest()).decode()


def mask(target: str) -> str:
    """A target for logs: a robot's name is the operator's and shown; a chat id is masked."""
    if ROBOT_NAME.match(target):
        return target
    from noti.core.privacy import mask_target

    return mask_target(target)


def coded_error(
    provider: str,
    errors: Mapping[str, type[DeliveryError]],
    code: str,
    text: str,
    *,
    status: int,
    wait_s: float = 60.0,
    retry_after_s: float | None = None,
) -> DeliveryError:
    """The error a vendor's refusal ``code`` stands for (its ``ERRORS`` table; an unknown code
    is a :class:`TemporaryFailure`, tried again a few times rather than dropped). A
    :class:`RateLimited` waits ``wait_s`` (the vendor's window; at least 1 s); another
    temporary failure at least ``retry_after_s`` (a ``Retry-After`` header)."""
    cls = errors.get(code, TemporaryFailure)
    detail = f"{provider}: HTTP {status} {code}: {text[:200]}"
    if cls is RateLimited:
        wait = max(MIN_RATE_LIMIT_WAIT_S, wait_s)
        return RateLimited(detail, retry_after_s=wait, provider=provider, vendor_code=code)
    if issubclass(cls, TemporaryFailure):
        return cls(detail, retry_after_s=retry_after_s, provider=provider, vendor_code=code)
    return cls(detail, provider=provider, vendor_code=code)


def json_or_none(response: httpx.Response) -> dict[str, Any] | None:
    """The answer as a JSON object, or None."""
    try:
        data = json.loads(response.content)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def no_code(provider: str, response: httpx.Response) -> DeliveryError:
    """The error of an answer that carries no vendor code: a 2xx (it may have been posted:
    :class:`AmbiguousOutcome`) or, by its status, :func:`status_error`."""
    if response.is_success:
        return AmbiguousOutcome(
            f"{provider}: HTTP {response.status_code} with an unreadable answer: {response.text[:200]!r}",
            provider=provider,
            vendor_code=f"http.{response.status_code}",
        )
    return status_error(provider, response)


def status_error(provider: str, response: httpx.Response, *, default_wait_s: float = 1.0) -> DeliveryError:
    """The error of an HTTP answer that carries no vendor code:

    ======================  =====================  ==========================================
    status                  raised                 why
    ======================  =====================  ==========================================
    429                     RateLimited            ``Retry-After`` (at least 1 s)
    500                     AmbiguousOutcome       it may have been posted: no failover
    other 5xx               TemporaryFailure       a gateway or an outage: not posted
    3xx, 401, 403, 404      ProviderMisconfigured  credentials or ``base_url``
    other 4xx               PermanentFailure       the vendor refused this message
    ======================  =====================  ==========================================
    """
    status = response.status_code
    code = f"http.{status}"
    detail = f"{provider}: HTTP {status}: {response.text[:200]!r}"
    retry_after = _http.retry_after_s(response, 0.0) if "retry-after" in response.headers else None
    if status == 429:
        wait = max(MIN_RATE_LIMIT_WAIT_S, retry_after if retry_after is not None else default_wait_s)
        return RateLimited(detail, retry_after_s=wait, provider=provider, vendor_code=code)
    if status == 500:
        return AmbiguousOutcome(detail, retry_after_s=retry_after, provider=provider, vendor_code=code)
    if status > 500:
        return TemporaryFailure(detail, retry_after_s=retry_after, provider=provider, vendor_code=code)
    if status < 400 or status in (401, 403, 404):
        return ProviderMisconfigured(detail, provider=provider, vendor_code=code)
    return PermanentFailure(detail, provider=provider, vendor_code=code)


# The credentials some chat vendors carry in a URL's *path* (Telegram's ``/bot<token>/``, a
# Slack webhook's ``/services/T…/B…/<secret>``, a Feishu hook id), masked in the request lines
# httpx logs as query credentials are (:mod:`noti.providers._http`).
for _pattern in (
    r"(/bot)[0-9]+:[A-Za-z0-9_-]+",
    r"(/services/T[A-Z0-9]+/B[A-Z0-9]+/)[A-Za-z0-9]+",
    r"(/hook/)[^/?\s]+",
):
    _http.mask_in_path(_pattern)
