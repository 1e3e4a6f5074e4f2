"""The hostile-HTTP suite's deployment: one real ``noti serve`` (access log on) and one real
``celery -A noti worker`` for the whole package, on a Redis database of their own, with the
vendors as local fakes; users, tokens and seeded data; the leak scan at the end.

The deployment is configured as the docs suggest an operator would:

* users ``alice`` and ``bob`` (plain), ``carol`` (plain, granted the ``hooks`` and
  ``hooksinternal`` providers: the latter so that a webhook of hers reaches a receiver on
  loopback, as point 1's end-to-end cases need),
  ``ops`` (root member), ``boss`` (root administrator);
* the sandbox as the SMS, WeChat and e-mail channels' provider; the webhook channel's is
  ``hookspub``, a webhook provider with no secret headers (the SSRF guard lives in the
  webhook provider, so a sandbox there would leave it untested);
* ``hooks``: a webhook provider whose options carry a secret header (``X-Internal-Key``) and
  a ``whsec_`` secret, as issue 32's finding 1 used; ``hooksinternal``: one with
  ``allow_private = true`` for internal receivers (finding 6);
* ``ali`` (Aliyun SMS, pushed receipts with a ``receipt_key``) and ``tw`` (Twilio, status
  callbacks to this server) pointed at ``tests/fakes``; ``vendor``: a sandbox taking signed
  receipts;
* ``mailses`` (Amazon SES, receipts through SNS: one topic, certificates and subscription
  confirmations under the SES fake's own ``http://127.0.0.1:<port>/``), ``mailtls`` (the same
  account with an ``https://`` prefix, for the downgrade cases) and ``mailgrid`` (SendGrid,
  its signed Event Webhook), pointed at ``tests/fakes``; alice and bob are granted
  ``mailses`` and ``mailgrid`` (their e-mails' bounces suppress addresses in their name).

Every secret is made fresh for the run and listed in :attr:`Deployment.secrets`.
"""

from __future__ import annotations

import os
import re
import secrets as random
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from tests.conftest import ADMIN, ALICE, BOB, MEMBER, WorkerProcess, wait_until
from tests.fakes.aliyun import AliyunFake, AliyunTemplate
from tests.fakes.sendgrid import SendGridFake
from tests.fakes.ses import ACCESS_KEY_ID as SES_KEY_ID
from tests.fakes.ses import FROM as MAIL_FROM
from tests.fakes.ses import REGION as SES_REGION
from tests.fakes.ses import TOPIC_ARN, SesFake
from tests.fakes.twilio import ACCOUNT_SID, FROM_NUMBER, TwilioFake
from tests.hostile_http.harness import AnswerLog, Secrets, assert_refused, bearer, changes, digest, leaks
from tests.servers import ApiProcess, free_port

#: A plain user the operator granted the ``hooks`` provider (``provider_grants``): the SSRF
#: cases that name a provider are hers, so that they meet the SSRF guard, not the grant. She
#: is granted ``hooksinternal`` (``allow_private``) too: point 1's end-to-end cases post
#: through it to receivers on loopback that she (or bob) controls.
CAROL = "carol"

#: The Redis database of this package (others: 1 noti's, 2-5 other suites').
DB = 9
#: The server's body limit (``NOTI_HTTP_BODY_MAX_BYTES``): small, so the 413 cases are cheap.
BODY_MAX = 64 * 1024
PHONE = "+8613912345678"
US_PHONE = "+14155550123"
ALIYUN_KEY_ID = "LTAIhostile"
HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every case of this package runs a real worker and uvicorn: marked ``integration`` and
    ``bounds`` (``make test`` runs those on the lowest supported versions too), whichever
    file it is in."""
    for item in items:
        if HERE in Path(item.path).parents:
            item.add_marker(pytest.mark.integration)
            item.add_marker(pytest.mark.bounds)


@dataclass
class Deployment:
    """The running deployment and what the cases need of it."""

    url: str
    redis: redis.Redis
    server: ApiProcess
    worker: WorkerProcess
    secrets: Secrets = field(repr=False)
    answers: AnswerLog = field(repr=False)
    #: API tokens by name: alice, alice2 (a second token of alice), bob, carol, ops (root
    #: member), boss (root administrator), revoked (alice's, revoked), expired (alice's, its
    #: expiry in the past), alice_vendor and boss_vendor (made with ``providers=["vendor"]``).
    tokens: dict[str, str] = field(repr=False)
    #: Seeded ids: alice_record, bob_record (waiting an hour), alice_event, bob_event (done),
    #: tw_record (sent through Twilio's fake, delivered by its signed callback).
    ids: dict[str, str] = field(default_factory=dict)
    twilio: Any = field(default=None, repr=False)
    aliyun: Any = field(default=None, repr=False)
    #: The SES fake (its SNS topic signs receipts) and the SendGrid fake (its Event Webhook key).
    ses: Any = field(default=None, repr=False)
    sendgrid: Any = field(default=None, repr=False)
    #: The settings' secrets by option (receipt keys and the like), for cases that sign.
    keys: dict[str, str] = field(default_factory=dict, repr=False)

    def client(self, **kwargs: Any) -> httpx.Client:
        """A client of the server whose every answer is checked for secrets."""
        return httpx.Client(
            base_url=self.url, timeout=30.0, event_hooks={"response": [self.answers.hook]}, **kwargs
        )

    def as_(self, who: str) -> dict[str, str]:
        """The ``Authorization`` header of ``who``'s token."""
        return bearer(self.tokens[who])

    @contextmanager
    def unchanged(self) -> Iterator[None]:
        """The body runs a request that must change nothing: the digest after equals the
        digest before (see :mod:`tests.hostile_http.harness`). It starts once the worker
        holds no message (kombu's ``unacked``): an earlier case's accepted notification still
        in flight would move kombu's bookkeeping under this one (seen with the suite on
        several xdist workers, which makes each one slower)."""
        _idle(self.redis)
        before = digest(self.redis)
        yield
        after = digest(self.redis)
        if after != before:
            # what was stored is being worked on: let the worker finish, so that this case's
            # failure does not move the database under the next cases too
            _settle(self.redis)
            raise AssertionError(f"the database changed: {changes(before, after)}")

    def ask(
        self,
        client: httpx.Client,
        method: str,
        path: str,
        *,
        who: str | None = "alice",
        headers: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> httpx.Response:
        """``method path`` as ``who`` (a name of :attr:`tokens`; None: no token); ``{name}`` in
        the path is a seeded id (:attr:`ids`); ``kwargs`` are httpx's (``json``, ``content``,
        ``params``)."""
        sent = {**(self.as_(who) if who else {}), **(headers or {})}
        return client.request(method, path.format(**self.ids), headers=sent, **kwargs)

    def refuses(
        self, status: int, code: str, client: httpx.Client, method: str, path: str, **kwargs: Any
    ) -> httpx.Response:
        """:meth:`ask` ``method path`` (``kwargs`` as there), which must change nothing and be
        refused with ``status`` and ``code`` (:func:`~tests.hostile_http.harness.assert_refused`)."""
        with self.unchanged():
            answer = self.ask(client, method, path, **kwargs)
        assert_refused(answer, status, code)
        return answer

    def logs(self) -> list[Path]:
        return [self.server.log, self.worker.log]


def _config(
    port: int,
    fakes: tuple[TwilioFake, AliyunFake, SesFake, SendGridFake],
    secrets: Secrets,
    keys: dict[str, str],
) -> str:
    twilio, aliyun, ses, sendgrid = fakes
    hookspub, hooks, internal = (
        secrets.add(f"whsec of {n}", _whsec()) for n in ("hookspub", "hooks", "hooksinternal")
    )
    keys["internal_key"] = secrets.add("X-Internal-Key of hooks", "xik-" + random.token_hex(16))
    keys["internal_auth"] = secrets.add(
        "Authorization of hooksinternal", "Bearer int-" + random.token_hex(16)
    )
    keys["vendor"] = secrets.add("receipt_secret of vendor", "vrs-" + random.token_hex(16))
    keys["ali_receipt"] = secrets.add("receipt_key of ali", "ark-" + random.token_hex(16))
    keys["ali_secret"] = secrets.add("access_key_secret of ali", "aks-" + random.token_hex(16))
    keys["tw_token"] = secrets.add("auth_token of tw", random.token_hex(16))
    aliyun.access_keys = {ALIYUN_KEY_ID: keys["ali_secret"]}
    twilio.auth_token = keys["tw_token"]
    ses.keys = {SES_KEY_ID: secrets.add("secret_access_key of mailses", "sak-" + random.token_hex(16))}
    keys["sg_api_key"] = secrets.add(
        "api_key of mailgrid", "SG." + random.token_urlsafe(16) + "." + random.token_urlsafe(32)
    )
    sendgrid.api_keys = {keys["sg_api_key"]: True}
    ses_port = ses.url.rsplit(":", 1)[1]

    def ses_provider(name: str, sns_url_prefix: str) -> str:
        """An SES provider of the fake; ``mailses`` and ``mailtls`` differ only in where SNS's
        certificates and confirmations may be fetched from."""
        return f"""[providers.{name}]
kind = "ses"
region = "{SES_REGION}"
access_key_id = "{SES_KEY_ID}"
secret_access_key = "{ses.keys[SES_KEY_ID]}"
from_addr = "{MAIL_FROM}"
endpoint = "{ses.url}"
sns_topic_arns = ["{TOPIC_ARN}"]
sns_url_prefix = "{sns_url_prefix}"
timeout_s = 5
"""

    channels = "".join(f'[channels.{c}]\nprovider = "sandbox"\n' for c in ("sms", "weixin", "email"))
    return f"""
root_admins = ["{ADMIN}"]
root_members = ["{MEMBER}"]

[provider_grants]
{CAROL} = ["hooks", "hooksinternal"]
{ALICE} = ["mailses", "mailgrid"]
{BOB} = ["mailses", "mailgrid"]

{channels}
[channels.webhook]
provider = "hookspub"

[providers.hookspub]
kind = "webhook"
secret = "{hookspub}"

[providers.hooks]
kind = "webhook"
secret = "{hooks}"
headers = {{ X-Internal-Key = "{keys["internal_key"]}" }}

[providers.hooksinternal]
kind = "webhook"
secret = "{internal}"
allow_private = true
headers = {{ Authorization = "{keys["internal_auth"]}" }}

[providers.vendor]
kind = "sandbox"
receipt_secret = "{keys["vendor"]}"

[providers.ali]
kind = "aliyun"
access_key_id = "{ALIYUN_KEY_ID}"
access_key_secret = "{keys["ali_secret"]}"
sign_name = "noti测试"
template_code = "SMS_100001"
text_param = "code"
endpoint = "{aliyun.url}"
timeout_s = 5
receipt_key = "{keys["ali_receipt"]}"

[providers.tw]
kind = "twilio"
account_sid = "{ACCOUNT_SID}"
auth_token = "{keys["tw_token"]}"
from = "{FROM_NUMBER}"
base_url = "{twilio.url}"
status_callback = "http://127.0.0.1:{port}/v1/receipts/tw"
timeout_s = 5

{ses_provider("mailses", f"{ses.url}/")}
{ses_provider("mailtls", f"https://127.0.0.1:{ses_port}/")}
[providers.mailgrid]
kind = "sendgrid"
api_key = "{keys["sg_api_key"]}"
from_addr = "{MAIL_FROM}"
base_url = "{sendgrid.url}"
webhook_public_key = "{sendgrid.public_key}"
timeout_s = 5
"""


def _whsec() -> str:
    import base64

    return "whsec_" + base64.b64encode(random.token_bytes(32)).decode()


@pytest.fixture(scope="package")
def deployment(redis_server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """The deployment (module docstring), seeded and settled; at its end the leak scan: a
    secret in any answer or log fails the run."""
    url = f"{redis_server}/{DB}"
    client = redis.Redis.from_url(url)
    client.flushdb()
    secrets, keys = Secrets(), dict[str, str]()
    with ExitStack() as stack:
        twilio = stack.enter_context(TwilioFake())
        aliyun = stack.enter_context(
            AliyunFake(templates={"SMS_100001": AliyunTemplate(("code",), kind="notice")})
        )
        ses = stack.enter_context(SesFake())
        sendgrid = stack.enter_context(SendGridFake())
        assert isinstance(twilio, TwilioFake) and isinstance(aliyun, AliyunFake)
        assert isinstance(ses, SesFake) and isinstance(sendgrid, SendGridFake)
        ses.auto_receipts = sendgrid.auto_receipts = False  # the cases post receipts themselves
        port = free_port()
        config = tmp_path_factory.mktemp("hostile_http") / "noti.toml"
        config.write_text(_config(port, (twilio, aliyun, ses, sendgrid), secrets, keys))
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("NOTI_")},
            "NOTI_REDIS_URL": url,
            "NOTI_CONFIG": str(config),
            "NOTI_USER": ALICE,
            "NOTI_HTTP_BODY_MAX_BYTES": str(BODY_MAX),
            "NOTI_PUMP_INTERVAL_S": "0.05",
            "PYTHONUNBUFFERED": "1",
        }
        # both start at once: each takes seconds to import on a slow machine
        server = ApiProcess(env, port=port)
        stack.callback(server.stop)
        worker = WorkerProcess(env, "-P", "threads", "-c", "2", name="hostile")
        stack.callback(worker.stop)
        tokens = _tokens(url, secrets)
        answers = AnswerLog(secrets)
        made = Deployment(f"http://127.0.0.1:{port}", client, server, worker, secrets, answers, tokens,
                          twilio=twilio, aliyun=aliyun, ses=ses, sendgrid=sendgrid, keys=keys)  # fmt: skip
        server.wait_ready()
        worker.wait_ready()
        _seed(made)
        yield made
        stack.close()  # the processes stop (their logs complete) and the fakes with them
        assert re.search(r'"(GET|POST|DELETE) /v1/\S* HTTP/1.1" [1-5]\d\d', server.output()), (
            "the access log is off: nothing to scan"
        )
        found = leaks(secrets, answers.answers, made.logs())
        assert not found, "secrets leaked:\n" + "\n".join(found)
    client.flushdb()
    client.close()


def _tokens(url: str, secrets: Secrets) -> dict[str, str]:
    """One token per user (alice two), a revoked one of alice's, an expired one of alice's,
    and alice's and boss's narrowed to the ``vendor`` provider, made by the root
    administrator with the Python API."""
    from noti.access.tokens import digest_of
    from noti.config import Settings
    from noti.sending.runtime import Runtime

    runtime = Runtime(Settings(redis_url=url, root_admins=[ADMIN], root_members=[MEMBER]))
    try:
        made = {}
        users = {
            "alice": ALICE,
            "alice2": ALICE,
            "bob": BOB,
            "carol": CAROL,
            "ops": MEMBER,
            "boss": ADMIN,
            "revoked": ALICE,
        }
        for name, user in users.items():
            made[name] = secrets.add(f"token {name}", runtime.tokens.add(user, acting=ADMIN)[0])
        runtime.tokens.revoke(made["revoked"], acting=ADMIN)
        for name, user in (("alice_vendor", ALICE), ("boss_vendor", ADMIN)):
            token = runtime.tokens.add(user, acting=ADMIN, providers=["vendor"])[0]
            made[name] = secrets.add(f"token {name}", token)
        # an hour's token whose hour has passed (by the Redis server's clock, which decides)
        made["expired"] = secrets.add(
            "token expired", runtime.tokens.add(ALICE, acting=ADMIN, expires="1h")[0]
        )
        seconds, micros = runtime.redis.time()
        runtime.redis.hset(
            runtime.keys.token(digest_of(made["expired"])), "expires_ms", seconds * 1000 + micros // 1000 - 1
        )
        return made
    finally:
        runtime.close()


def _seed(made: Deployment) -> None:
    """What the cases refer to, made through the API as its users would, then left to settle:
    records waiting an hour (nothing sends them while the cases run), events (done: no
    listener), and an SMS the worker sent through Twilio's fake, delivered by the fake's
    signed status callback to this server (the receipt path works, so the refusals of forged
    ones are refusals of a working door)."""
    sms = {"type": "sms", "to": PHONE, "text": "seeded", "delay": 3600}
    with made.client() as client:
        for who in ("alice", "bob"):
            answer = client.post("/v1/notifications", json=sms, headers=made.as_(who))
            assert answer.status_code == 201, answer.text
            made.ids[f"{who}_record"] = answer.json()["id"]
            answer = client.post(
                "/v1/events", json={"name": "order.paid", "payload": {"by": who}}, headers=made.as_(who)
            )
            assert answer.status_code == 202, answer.text
            made.ids[f"{who}_event"] = answer.json()["id"]
        sent = client.post(
            "/v1/notifications",
            json={"type": "sms", "to": US_PHONE, "text": "seeded", "provider": "tw"},
            headers=made.as_("boss"),
        )
        assert sent.status_code == 201, sent.text
        made.ids["tw_record"] = sent.json()["id"]

        def delivered() -> bool:
            record = client.get(f"/v1/notifications/{made.ids['tw_record']}", headers=made.as_("boss")).json()
            return bool(record.get("noti_dlv") == "delivered")

        def events_done() -> bool:
            return all(
                client.get(f"/v1/events/{made.ids[f'{who}_event']}", headers=made.as_(who))
                .json()
                .get("status")
                == "done"
                for who in ("alice", "bob")
            )

        wait_until(delivered, timeout=30)
        wait_until(events_done, timeout=30)
    _settle(made.redis)


def _idle(client: redis.Redis, timeout: float = 30.0) -> None:
    """Until the worker holds no message (every one it took is acked); at once when none."""
    deadline = time.monotonic() + timeout
    while client.exists("unacked"):
        assert time.monotonic() < deadline, "the worker still holds a message"
        time.sleep(0.05)


def _settle(client: redis.Redis, timeout: float = 30.0) -> None:
    """Until two digests a moment apart are equal: the worker has finished with the seed."""
    previous: dict[str, str] | None = None
    deadline = time.monotonic() + timeout
    while True:
        now = digest(client)
        if now == previous and not client.exists("unacked"):  # each message acked, too
            return
        assert time.monotonic() < deadline, f"the database did not settle: {changes(previous or {}, now)}"
        previous = now
        time.sleep(0.3)


@pytest.fixture(scope="package")
def client(deployment: Deployment) -> Iterator[httpx.Client]:
    """A client of the server (every answer checked for secrets as it arrives)."""
    with deployment.client() as made:
        yield made
