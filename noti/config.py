"""Settings: the one object that holds noti's configuration, and the only reader of the environment.

Values come, highest first, from ``NOTI_*`` environment variables (nested with ``__``, e.g.
``NOTI_CHANNELS__SMS__PROVIDER=sandbox``), then from the TOML file (:func:`config_file`: the
one ``NOTI_CONFIG`` names, else the nearest ``noti.toml`` from the working directory up), then
from the defaults below. Provider options (secrets included) live in the TOML file under
``[providers.<name>]``; they are never printed and never copied into records.
"""

from __future__ import annotations

import functools
import getpass
import os
import re
import typing
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from noti.bridge.webman.settings import WebmanSettings
from noti.errors import InvalidConfig
from noti.inputs import POOL_KEY_BASE, POOL_NAME_PATTERN, USER_NAME

__all__ = ["CONFIG_FILE_NAME", "ChannelSettings", "Settings", "config_file", "get_settings", "load_settings"]

CommaList = Annotated[list[str], NoDecode]

#: The settings file looked for when ``NOTI_CONFIG`` is not set.
CONFIG_FILE_NAME = "noti.toml"


def config_file(start: Path | None = None) -> str | None:
    """The TOML file the settings are read from: the one ``NOTI_CONFIG`` names (set but empty:
    none), else the first ``noti.toml`` in ``start`` (the working directory) or one of its
    parents, so ``noti`` run anywhere in a project finds its file without exported variables.
    """
    named = os.environ.get("NOTI_CONFIG")
    if named is not None:
        return named or None
    here = (start or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        candidate = directory / CONFIG_FILE_NAME
        if candidate.is_file():
            return str(candidate)
    return None


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry, e.g. in a bare container
        return "anonymous"


class ChannelSettings(BaseModel):
    """Per-channel choices (``[channels.sms]``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    #: Provider name(s) used when a record names none, in failover order: ``"aliyun,tencent"``.
    provider: str | None = None
    #: Attempt limit for this channel's records (``noti_retry_max``); None = the global default.
    retry_max: int | None = Field(default=None, ge=1, le=100)
    #: Retry policy of this channel's records, ``"linear:60"`` or ``"exponential:5:600"``.
    retry_policy: str | None = None
    #: What an attempt does when an earlier one may have been sent (a timeout after the
    #: request went out, a worker killed mid-send) and the provider's status look-up cannot
    #: tell whether it was: ``hold`` sends nothing (the look-up is tried again at each
    #: attempt; when they run out the record fails for an operator): never two messages, maybe
    #: none. ``resend`` sends again: never none, maybe two. See docs/channels/sms-once.md.
    lookup_failure: Literal["hold", "resend"] = "hold"
    #: Seconds a notification of this channel that asks for a fallback (``fallback=`` of
    #: :func:`noti.notify`) waits for its delivery receipt before the fallback is sent, when
    #: the fallback names no wait of its own.
    fallback_after_s: float = Field(default=120.0, gt=0, le=30 * 86400)


class Settings(BaseSettings):
    """Everything noti reads from its environment, typed and validated."""

    model_config = SettingsConfigDict(
        env_prefix="NOTI_",
        env_nested_delimiter="__",
        # an unknown key in the TOML file (a typo) is an error; unknown NOTI_* variables are
        # not read at all (other tools use the prefix: NOTI_FLOWER_PORT, NOTI_TEST_REDIS_URL)
        extra="forbid",
        frozen=True,
        # NaN and infinities pass ``gt=0`` or no bound at all, then break the arithmetic
        allow_inf_nan=False,
    )

    #: The TOML file these settings are read from (``NOTI_CONFIG``; unset: the nearest
    #: ``noti.toml`` from the working directory up; set to "": none).
    config: str | None = None
    #: Record store (and, unless ``broker_url`` is set, the Celery broker).
    redis_url: str = "redis://127.0.0.1:6379/0"
    #: Celery broker; defaults to ``redis_url`` so a notification is one Redis round trip away.
    broker_url: str | None = None
    #: ``notify()`` (and every call that stores notifications) returns only once this many
    #: replicas have the records (Redis ``WAIT``), else raises ``e.noti.store.unconfirmed``:
    #: a failover then loses nothing that was acknowledged. 0: once the primary has them.
    redis_wait_replicas: int = Field(default=0, ge=0, le=16)
    #: How long to wait for those replicas (milliseconds).
    redis_wait_timeout_ms: int = Field(default=1000, ge=1, le=60_000)
    #: Prefix of every Redis key noti owns (records, indexes, delayed set, locks).
    key_prefix: str = "noti:"
    #: Where the sender-number pools live (:mod:`noti.numpool`; the CLI, the providers and
    #: the API alike): a ``redis://``, ``rediss://``, ``unix://`` or ``redis+sentinel://`` URL,
    #: or a Redis Cluster ``redis+cluster://[[user]:password@]host:port[,host:port…]``.
    #: None: the pools live in ``redis_url``'s Redis.
    numpool_redis_url: str | None = None
    #: Pools whose keys live under a base of the operator's choice instead of
    #: ``<key_prefix>{numpool:<pool>}``: pool name -> base, one hash tag in it, e.g.
    #: ``{ shared = "{numpool}" }`` to share the pool plain clients keep under ``{numpool}``.
    numpool_keys: dict[str, str] = Field(default_factory=dict)
    #: Acting user of the CLI and of API calls that pass no ``user``.
    user: str = Field(default_factory=_os_user)
    #: Administrators of the ``root`` group: level cap 1000, may see and delete everything.
    root_admins: CommaList = Field(default_factory=list)
    #: Members of the ``root`` group: level cap 100, may see and delete everything.
    root_members: CommaList = Field(default_factory=list)
    #: Providers each user may name (``provider=``) beyond their channels' defaults, and the
    #: only way to use a provider that reaches private addresses (``allow_private``), even as
    #: a channel default: user name (or ``"*"``, everyone) -> provider names,
    #: ``{ alice = ["hook"], "*" = ["twilio"] }``. Root administrators may name any provider.
    #: An API token may narrow it further (``noti token add -providers``).
    #: See :mod:`noti.access.grants`.
    provider_grants: dict[str, list[str]] = Field(default_factory=dict)

    #: Lease a worker takes on a record while it calls the provider (``noti_timeout_at``).
    lease_timeout_s: float = Field(default=30.0, gt=0, le=600)
    #: Default attempt limit (``noti_retry_max``).
    retry_max: int = Field(default=3, ge=1, le=100)
    #: Back-off between attempts: ``linear`` (attempt × retry_seconds, webman's default) or
    #: ``exponential`` (retry_seconds × 2^(attempt-1) with full jitter, capped).
    retry_policy: Literal["linear", "exponential"] = "linear"
    #: Back-off base in seconds (``linear``: attempt × this; ``exponential``: this × 2^(attempt-1)).
    retry_seconds: float = Field(default=60.0, ge=0)
    #: Longest back-off between two attempts (seconds).
    retry_cap_s: float = Field(default=3600.0, gt=0)
    #: Rate-limit waits (not attempts) stop being free once a record is this old.
    rate_limited_max_s: float = Field(default=86400.0, gt=0)
    #: How long done records are kept before ``clean`` (and the hourly beat job) removes them.
    keep_done_s: float = Field(default=3 * 86400, gt=0)

    #: kombu's visibility timeout: an unacked message is redelivered after this long.
    #: Duplicates are harmless (the claim refuses them), so it only bounds crash recovery.
    visibility_timeout_s: float = Field(default=300.0, gt=0)
    #: How often a worker looks for unacked messages of dead workers (kombu 5.7 option).
    unacked_restore_interval_s: float = Field(default=10.0, gt=0)
    #: Worker pool and concurrency used when ``celery worker`` is given none on its command line.
    worker_pool: Literal["threads", "prefork", "solo", "gevent", "eventlet"] = "threads"
    #: Worker pool size used when ``celery worker`` is given no ``-c``.
    worker_concurrency: int = Field(default=8, ge=1, le=1000)
    #: Workers send task events (Flower's task list and counters, ``celery events``): on by
    #: default; off saves their cost per notification (``make bench`` prints both).
    worker_task_events: bool = True
    #: How workers run ``noti.deliver`` messages. ``batch``: the consumer gathers the messages
    #: of each broker fetch, claims them in one script call, sends (answer-at-once providers
    #: on its thread, the others concurrently on a per-process asyncio loop) and records the
    #: outcomes in one call; any pool. ``task``: one Celery task execution per message, in
    #: the pool (Celery's per-task signals and time limits apply).
    delivery_mode: Literal["batch", "task"] = "batch"
    #: Most ``noti.deliver`` messages in one batch.
    delivery_batch_max: int = Field(default=100, ge=1, le=1000)
    #: Messages a worker process holds unacknowledged at once in batch mode (its prefetch
    #: window): the sends waiting on providers and the next batch. It bounds the sends in
    #: flight, and how many lower-priority messages a worker already holds when a higher one
    #: arrives. Per process for ``solo``; divided among ``worker_concurrency`` otherwise.
    delivery_window: int = Field(default=128, ge=1, le=100_000)
    #: The event loop of a worker's send loop, where batch mode's providers that wait on the
    #: network are awaited: ``auto`` takes uvloop when it is installed (``noti[http]``
    #: installs it with uvicorn), else asyncio's; ``asyncio`` always asyncio's. uvloop cut
    #: the worker CPU per 20 ms webhook by ~5 % here (``make bench``, scenario 4).
    send_loop: Literal["auto", "asyncio"] = "auto"
    #: Fetch many messages per broker wake-up and batch the unacked bookkeeping
    #: (:mod:`noti.celery.transport`); off: kombu's stock Redis transport.
    broker_bulk_fetch: bool = True
    #: How often the delayed pump looks for due records (seconds).
    pump_interval_s: float = Field(default=0.2, gt=0, le=10)
    #: How often beat removes done records past ``keep_done_s`` (seconds).
    clean_interval_s: float = Field(default=3600.0, gt=0)
    #: How often waiting records whose queue message was lost are looked for, and how long a
    #: record must have gone untouched (and its queue be empty) to count as lost.
    sweep_interval_s: float = Field(default=60.0, gt=0)
    #: How long a waiting record must have gone untouched to count as lost (seconds).
    sweep_after_s: float = Field(default=300.0, gt=0)
    #: How often beat trims dead letters past ``dead_letter_max_age_s`` (seconds).
    dead_letter_trim_interval_s: float = Field(default=3600.0, gt=0)

    #: Port of the Prometheus exporter a worker serves (:mod:`noti.observe.prometheus`); None:
    #: no exporter (the default). The numbers are cluster-wide, so one exporter is enough;
    #: ``noti metrics`` serves the same without a worker.
    metrics_port: int | None = Field(default=None, ge=1, le=65535)
    #: Address the worker's exporter and ``noti metrics`` listen on.
    metrics_bind: str = "0.0.0.0"
    #: OpenTelemetry tracing (:mod:`noti.tracing`, the ``otel`` extra): ``auto`` traces when
    #: the process has a tracer provider (set by the application or ``opentelemetry-instrument``);
    #: ``otlp`` has noti set one up exporting OTLP over HTTP, configured by the standard
    #: ``OTEL_*`` variables (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_SERVICE_NAME``, …) unless
    #: the process has one; ``off`` never traces.
    tracing: Literal["auto", "otlp", "off"] = "auto"
    #: Which provider requests carry the trace context headers (``traceparent``): ``webhook``
    #: (the webhooks' receivers, usually the application's own services), ``all`` (vendors'
    #: APIs too) or ``none``.
    tracing_propagate: Literal["webhook", "all", "none"] = "webhook"

    #: Mask what Celery shows of ``noti.notify`` calls (``argsrepr``/``kwargsrepr``: worker
    #: logs, task events, Flower, ``inspect``; and the target in its failure messages):
    #: targets as ``+86139****5678``, message bodies as their length. Off: shown in clear.
    mask_in_celery: bool = True

    #: How long an idempotency key of ``notify(..., idempotency_key=…)`` is remembered.
    idempotency_ttl_s: float = Field(default=7 * 86400, gt=0)
    #: Most dead letters kept in the stream (older ones are trimmed first).
    dead_letter_max_len: int = Field(default=10_000, ge=1)
    #: Dead letters older than this are trimmed (seconds).
    dead_letter_max_age_s: float = Field(default=7 * 86400, gt=0)
    #: ``"module:function"`` called with each new dead letter (e.g. to alert); None: no hook.
    dead_letter_hook: str | None = None
    #: Application hooks run by the worker around each delivery: ``"package.module:Class"``, a
    #: :class:`noti.sending.handlers.NotificationHandler` subclass (retry decider, on_success,
    #: on_retry, on_failure, on_dead_letter).
    handlers: str | None = None
    #: Modules the CLI, the API and the workers import to find the Celery tasks that event
    #: listeners call (Celery's ``imports``): ``"shop.tasks,shop.audit"``. A module that
    #: cannot be imported is an error naming it (``e.noti.config.imports``).
    imports: CommaList = Field(default_factory=list)

    #: Events (:mod:`noti.events`). The processor hands over to a fresh one after this long…
    event_processor_max_runtime_s: float = Field(default=300.0, gt=0)
    #: …or once its process's resident memory passes this many MiB (checked after each event).
    event_processor_max_memory_mb: int = Field(default=256, ge=1)
    #: Time-to-live of the processor's liveness lock (renewed every third of it): how soon a
    #: dead processor is replaced.
    event_lock_ttl_s: float = Field(default=10.0, ge=0.5, le=600)
    #: How many of the processors that activated an event may die: one whose processor died
    #: that often (a listener that kills or exhausts its process; a processor that stalled
    #: and said so is not counted) is marked done as ``e.noti.event.poison``, dead-lettered,
    #: and the queue moves on.
    event_max_tries: int = Field(default=3, ge=1, le=100)
    #: How long done events are kept before the beat job ``noti.events.clean`` removes them.
    event_keep_done_s: float = Field(default=7 * 86400, gt=0)
    #: Largest event payload accepted by ``dispatch``, in bytes of its JSON encoding.
    event_payload_max_bytes: int = Field(default=64 * 1024, ge=2, le=16 * 1024 * 1024)
    #: How often beat checks that events waiting have a live processor (``noti.events.sweep``).
    event_sweep_interval_s: float = Field(default=30.0, gt=0)

    #: A sent SMS or WeChat message whose vendor reported no delivery within this many seconds
    #: is marked delivery ``unknown`` (a later receipt still moves it on; :mod:`noti.delivery`).
    delivery_unknown_after_s: float = Field(default=3600.0, gt=0, le=30 * 86400)
    #: How often beat marks silent deliveries unknown and posts waiting status callbacks.
    delivery_tick_interval_s: float = Field(default=2.0, gt=0, le=3600)
    #: How often the workers' delayed-set pump closes the recipients' digest windows that are
    #: due and makes their notices (a window's notice comes about this long after it is due;
    #: beat does it every 30 s as well, a backstop).
    digest_tick_interval_s: float = Field(default=1.0, gt=0, le=3600)
    #: How often beat asks the vendors that are polled for the delivery of sent messages.
    receipt_poll_interval_s: float = Field(default=60.0, gt=0, le=86400)
    #: How long a vendor message id is remembered to match a late receipt to its record.
    receipt_window_s: float = Field(default=3 * 86400, gt=0, le=30 * 86400)
    #: Reports one pushed receipt request may carry; a push with more is refused whole
    #: (``e.noti.receipt.toomany``, nothing stored: the vendor pushes it again).
    receipt_push_max: int = Field(default=1000, ge=1, le=100_000)
    #: Receipts kept at most, all providers together, while they wait for the send they name
    #: to be recorded (they came before the worker wrote it); more are dropped and counted.
    receipt_early_max: int = Field(default=10_000, ge=1, le=10_000_000)
    #: How long such a receipt is kept for its send to be recorded.
    receipt_early_ttl_s: float = Field(default=600.0, gt=0, le=30 * 86400)
    #: The address vendors reach noti's HTTP API at (``https://noti.example.com``): the receipt
    #: URLs noti gives them (Twilio's ``StatusCallback``) and checks their signatures against,
    #: and the one-click unsubscribe links of recipient notices (``/v1/unsubscribe/…``).
    public_url: str | None = Field(default=None, pattern=r"^https?://[^\s/?#]+(/[^\s?#]*)?$")
    #: Quiet hours of a recipient whose profile names none (``"22:00-07:00"``, in the
    #: recipient's own time): a notice due inside them is held until they end. Unset: none.
    quiet_hours: str | None = Field(
        default=None,
        pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9])?-([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9])?$",
    )
    #: The timezone of a recipient whose profile names none (an IANA name).
    recipient_timezone: str = "UTC"
    #: Notices at this level or above are not held by quiet hours (nor is a critical category's).
    quiet_bypass_level: int = Field(default=100, ge=1, le=1000)
    #: How long a notice (``notify(recipient=…)``) is kept, and its recipient's log of it.
    notice_keep_s: float = Field(default=30 * 86400, gt=0, le=400 * 86400)
    #: ``noti serve``: the interface the HTTP API listens on.
    http_bind: str = "127.0.0.1"
    #: ``noti serve``: the port the HTTP API listens on.
    http_port: int = Field(default=8700, ge=1, le=65535)
    #: Largest request body the HTTP API reads (a batch of notifications, a receipt).
    http_body_max_bytes: int = Field(default=4 * 1024 * 1024, ge=1024, le=256 * 1024 * 1024)
    #: ``noti serve``: bytes of request bodies one process reads at once, all requests together;
    #: a body that does not fit is answered 503 ``e.noti.http.busy`` (bounds the memory bodies take).
    http_bodies_max_bytes: int = Field(default=32 * 1024 * 1024, ge=1024, le=4 * 1024 * 1024 * 1024)
    #: ``noti serve``: largest request line and headers, in bytes (431 ``e.noti.http.headers``).
    http_header_max_bytes: int = Field(default=16 * 1024, ge=1024, le=1024 * 1024)
    #: ``noti serve``: seconds a request's line and headers may take from its first byte (408
    #: ``e.noti.http.timeout``, then the connection is closed: a slowloris client).
    http_header_timeout_s: float = Field(default=10.0, gt=0, le=3600)
    #: ``noti serve``: seconds a request's body may take from the end of its headers (408).
    http_body_timeout_s: float = Field(default=60.0, gt=0, le=3600)
    #: ``noti serve``: seconds a connection may wait with no request (a new one before its first
    #: byte, a kept-alive one between requests) before it is closed.
    http_idle_timeout_s: float = Field(default=5.0, gt=0, le=3600)
    #: ``noti serve``: requests one process works on at once; more are answered 503 ``e.noti.http.busy``.
    http_requests_max: int = Field(default=256, ge=1, le=100_000)
    #: ``noti serve``: connections one process holds open; one more is answered 503 and closed.
    http_connections_max: int = Field(default=1024, ge=1, le=1_000_000)
    #: ``noti serve``: connections the kernel queues before the process accepts them (listen backlog).
    http_backlog: int = Field(default=2048, ge=1, le=65535)

    #: ``[channels.<type>]`` tables: a channel's default provider(s), attempt limit, retry policy.
    channels: dict[str, ChannelSettings] = Field(default_factory=dict)
    #: ``[providers.<name>]`` tables; ``kind`` picks the implementation (defaults to the name).
    providers: dict[str, dict[str, Any]] = Field(default_factory=dict)
    #: ``[webman]``: the webman-redis-queue bridge (:mod:`noti.bridge.webman`).
    webman: WebmanSettings = Field(default_factory=WebmanSettings)

    @field_validator("root_admins", "root_members", "imports", mode="before")
    @classmethod
    def _split_names(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [name.strip() for name in value.split(",") if name.strip()]
        return value

    @field_validator("user", "root_admins", "root_members")
    @classmethod
    def _user_names(cls, value: Any) -> Any:
        for name in [value] if isinstance(value, str) else value:
            if not USER_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not a user name (1-64 letters, digits or _ . @ + -)")
        return value

    @field_validator("provider_grants")
    @classmethod
    def _grant_names(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        for user, names in value.items():
            if user != "*" and not USER_NAME.fullmatch(user):
                raise ValueError(f"{user[:80]!r} is not a user name or '*'")
            for name in names:
                if not name or name != name.strip() or "," in name or len(name) > 64:
                    raise ValueError(f"{user}: {name[:80]!r} is not a provider name")
        return value

    @field_validator("numpool_redis_url")
    @classmethod
    def _numpool_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from noti.redis.urls import check_url

        problem = check_url(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("numpool_keys")
    @classmethod
    def _numpool_bases(cls, value: dict[str, str]) -> dict[str, str]:
        for name, base in value.items():
            if not re.fullmatch(POOL_NAME_PATTERN, name):
                raise ValueError(f"{name[:80]!r} is not a pool name (1-64 of A-Z a-z 0-9 _ . -)")
            if not POOL_KEY_BASE.fullmatch(base):
                raise ValueError(
                    f"pool {name}: key base {base[:80]!r} must hold one hash tag {{…}} and no space "
                    "or other brace, e.g. '{numpool}'"
                )
        if len(set(value.values())) != len(value):
            raise ValueError("two pools share a key base")
        return value

    @field_validator("key_prefix")
    @classmethod
    def _prefix_shape(cls, value: str) -> str:
        if not value or any(c.isspace() for c in value):
            raise ValueError("must be a non-empty string without spaces, e.g. 'noti:'")
        return value

    @property
    def broker(self) -> str:
        """The Celery broker URL actually used."""
        return self.broker_url or self.redis_url

    def channel(self, name: str) -> ChannelSettings:
        """Settings of one channel (defaults when it has no table)."""
        return self.channels.get(name) or ChannelSettings()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        found = config_file()
        if found:
            path = Path(found)
            if not path.is_file():
                raise InvalidConfig(f"NOTI_CONFIG names {found!r}, which is not a file")
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=path))
        return tuple(sources)


def load_settings(**overrides: Any) -> Settings:
    """Read the settings now (environment, then ``NOTI_CONFIG``), with keyword overrides on top.

    Raises:
        InvalidConfig: a value is malformed; the message names the variable and the problem.
    """
    if "config" not in overrides and "NOTI_CONFIG" not in os.environ:
        overrides["config"] = config_file()  # the file found, for who asks (noti webman register)
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise InvalidConfig("; ".join(_problem(err) for err in exc.errors())) from exc
    except ValueError as exc:  # e.g. a TOML syntax error
        raise InvalidConfig(f"cannot read the settings: {exc}") from exc


def _problem(error: Any) -> str:
    """One validation error, named as the user wrote it: the variable, or the TOML key."""
    loc = [str(part) for part in error["loc"]]
    found = config_file()
    if error["type"] != "extra_forbidden":
        variable = f"NOTI_{'__'.join(loc).upper()}"
        if found and not any(name.upper() == variable for name in os.environ):
            # the value came from the TOML file: name its key there, not a variable
            return f"{'.'.join(loc)} in {found}: {error['msg']}"
        return f"{variable}: {error['msg']}"
    where = f" in {found}" if found else ""
    message = f"unknown setting {'.'.join(loc)!r}{where}"
    import difflib  # only for this message: reading valid settings needs none of it

    known = _known_keys(loc[:-1])
    close = difflib.get_close_matches(loc[-1], known, n=1)
    return message + (f" (did you mean {close[0]!r}?)" if close else "")


def _known_keys(parent: list[str]) -> list[str]:
    """The keys a table at ``parent`` (``[]``, ``["channels", "sms"]``, ``["webman"]`` …) may hold."""
    model: Any = Settings
    for part in parent:
        if isinstance(model, type) and issubclass(model, BaseModel) and part in model.model_fields:
            model = model.model_fields[part].annotation
        elif typing.get_origin(model) is dict:  # a table of named tables: ``[channels.<name>]``
            model = typing.get_args(model)[1]
        else:
            return []
    return list(model.model_fields) if isinstance(model, type) and issubclass(model, BaseModel) else []


@functools.cache
def get_settings() -> Settings:
    """The process-wide settings, read once. Call only at the edges (app, CLI, API)."""
    return load_settings()
