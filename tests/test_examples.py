"""The Django and Flask examples (``examples/``), driven for real.

Each test calls the example's views in this process (Django's test ``Client``, Flask's
``test_client()``) with noti on the test Redis, and a real noti worker delivers through the
sandbox provider. The examples' own Celery apps get their own Redis database, which must stay
empty: noti's task goes to noti's broker whichever Celery app is current.

Django can be set up once per process: the module fixture does it (settings, a migrated SQLite
database in a temporary directory) and puts back the environment, ``sys.path`` and Celery's
current and default apps, so the other test modules see none of it.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery

import noti
from noti import recipients
from noti.core.record import Status
from tests.conftest import BASE_ENV, MEMBER, ROOT, sandbox_outbox, wait_until
from tests.servers import CeleryProcess

pytestmark = pytest.mark.integration

pytest.importorskip("django")
pytest.importorskip("flask")

DJANGO_DIR = ROOT / "examples" / "django_project"
FLASK_DIR = ROOT / "examples" / "flask_app"
PHONE = "+8613912345678"


@contextlib.contextmanager
def _process_state_restored(*paths: Path) -> Iterator[None]:
    """Put back ``os.environ``, ``sys.path`` and Celery's current and default apps on exit."""
    from celery import _state

    environ, path = dict(os.environ), list(sys.path)
    default_app, current_app = _state.default_app, _state._tls.current_app
    sys.path[:0] = [str(p) for p in paths]
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(environ)
        sys.path[:] = path
        _state.default_app, _state._tls.current_app = default_app, current_app


def _queued(rt: Any, queue: str = "noti.intake") -> int:
    """Messages waiting in ``queue`` (all its priority lists) on noti's Redis."""
    client = rt.redis  # decodes replies
    return sum(client.llen(key) for key in client.scan_iter(f"{queue}*") if client.type(key) == "list")


def _delivered(rt: Any, count: int) -> list[dict[str, Any]]:
    """Wait until the sandbox has ``count`` deliveries and their records are done; the outbox.

    A record is done only after its send, so an outbox still this long then was sent once.
    """
    wait_until(lambda: len(sandbox_outbox(rt)) >= count)
    ids = [entry["id"] for entry in sandbox_outbox(rt)]
    wait_until(lambda: all(rt.store.get(record_id).status == Status.DONE for record_id in ids))
    outbox = sandbox_outbox(rt)
    assert len(outbox) == count, outbox
    return outbox


@pytest.fixture(scope="module")
def host_broker(redis_server: str) -> str:
    """The examples' own Celery broker: a database noti does not use."""
    url = f"{redis_server}/3"  # /1 is noti's, /2 test_review_fixes's
    redis.Redis.from_url(url).flushdb()
    return url


@pytest.fixture
def host_broker_client(host_broker: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(host_broker)
    client.flushdb()
    yield client
    client.close()


# --- Django -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def django_project(
    redis_url: str, host_broker: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """The Django example, set up in this process with a migrated SQLite database."""
    import django
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connections
    from django.urls import resolve

    if settings.configured:
        assert settings.SETTINGS_MODULE == "proj.settings", "Django was set up by another project"
    with _process_state_restored(DJANGO_DIR):
        with _process_state_restored():
            # read by the settings module and Celery's Django fix-up during the setup only
            os.environ["DJANGO_SETTINGS_MODULE"] = "proj.settings"
            os.environ["ORDERS_DB_PATH"] = str(tmp_path_factory.mktemp("django") / "orders.sqlite3")
            os.environ["PROJ_BROKER_URL"] = host_broker
            django.setup()
            call_command("migrate", verbosity=0)
            resolve("/orders/")  # imports the URLconf and views now
        yield
        connections.close_all()


@pytest.fixture
def orders_client(django_project: None, host_broker_client: redis.Redis) -> Any:
    from django.test import Client
    from orders.models import Order  # type: ignore[import-not-found]

    Order.objects.all().delete()
    return Client()


def _place_order(client: Any, item: str = "teapot", phone: str = PHONE) -> int:
    response = client.post("/orders/", {"phone": phone, "item": item})
    assert response.status_code == 201, response.content
    return int(response.json()["order"])


def test_django_placed_order_is_texted_by_noti_worker(
    orders_client: Any, rt: Any, worker: Any, host_broker_client: redis.Redis
) -> None:
    # when: a customer places an order
    pk = _place_order(orders_client, item="blue teapot")

    # then: noti's worker texted them once, and nothing went through the project's Celery app
    [sms] = _delivered(rt, 1)
    assert (sms["type"], sms["target"], sms["fields"]["text"]) == (
        "sms",
        PHONE,
        f"Order {pk} received: blue teapot",
    )
    assert host_broker_client.dbsize() == 0


def test_django_order_notification_is_sent_only_when_the_transaction_commits(
    orders_client: Any, rt: Any, start_worker_now: Callable[[], Any]
) -> None:
    from django.db import transaction
    from orders.models import Order

    # given: the view runs inside an outer transaction (as with ATOMIC_REQUESTS)
    with transaction.atomic():
        pk = _place_order(orders_client)
        # then: nothing is queued before the commit
        assert Order.objects.filter(pk=pk).exists()
        assert _queued(rt) == 0

    # when: it commits, then: the message is queued and a worker delivers it
    assert _queued(rt) == 1
    with start_worker_now():
        [sms] = _delivered(rt, 1)
    assert (sms["target"], sms["fields"]["text"]) == (PHONE, f"Order {pk} received: teapot")


def test_django_rolled_back_order_sends_nothing(
    orders_client: Any, rt: Any, start_worker_now: Callable[[], Any]
) -> None:
    from django.db import transaction
    from orders.models import Order

    class PaymentDeclined(Exception):
        pass

    # given: an order placed in a transaction that then fails and rolls back
    with pytest.raises(PaymentDeclined), transaction.atomic():
        _place_order(orders_client, item="rolled back")
        raise PaymentDeclined

    # then: no order and no message
    assert not Order.objects.exists()
    assert _queued(rt) == 0

    # and: a worker started afterwards delivers only the next, committed order
    pk = _place_order(orders_client, item="committed")
    with start_worker_now():
        [sms] = _delivered(rt, 1)
    assert sms["fields"]["text"] == f"Order {pk} received: committed"


def test_django_shipped_view_returns_the_record_id_and_a_repeat_sends_nothing_more(
    orders_client: Any, rt: Any, worker: Any
) -> None:
    from orders.models import Order

    # given: an order (made without the view, so it has no notification of its own)
    order = Order.objects.create(phone=PHONE, item="kettle")

    # when: the shipped view is called twice (a double click)
    first = orders_client.post(f"/orders/{order.pk}/shipped/")
    second = orders_client.post(f"/orders/{order.pk}/shipped/")

    # then: both answers name the one record, stored before the view returned, sent once
    assert first.status_code == second.status_code == 200
    record_id = first.json()["notification"]
    assert second.json()["notification"] == record_id
    assert noti.get(record_id).target == PHONE
    [sms] = _delivered(rt, 1)
    assert (sms["id"], sms["target"], sms["fields"]["text"]) == (
        record_id,
        PHONE,
        f"Order {order.pk} has shipped",
    )
    order.refresh_from_db()
    assert order.shipped


def test_django_shipped_view_answers_400_for_a_phone_noti_refuses(orders_client: Any, rt: Any) -> None:
    from orders.models import Order

    order = Order.objects.create(phone="12345", item="kettle")

    response = orders_client.post(f"/orders/{order.pk}/shipped/")

    assert response.status_code == 400
    assert response.json()["error"] == "e.cmd.noti.add.badtarget"
    assert noti.list_notifications() == []


@contextlib.contextmanager
def _intake_task_ids() -> Iterator[list[str]]:
    """The ids of the ``noti.notify`` tasks published while the block runs."""
    from celery import signals

    ids: list[str] = []

    def published(sender: Any = None, headers: Any = None, **kwargs: Any) -> None:
        if sender == "noti.notify":
            ids.append(headers["id"])

    signals.after_task_publish.connect(published, weak=False)
    try:
        yield ids
    finally:
        signals.after_task_publish.disconnect(published)


def test_django_a_customers_shipped_order_notifies_them_through_their_profile_and_a_template(
    orders_client: Any, rt: Any, worker: Any
) -> None:
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from orders.models import Order

    from noti.celery.app import app

    # given: the deploy step put the project's templates, the operator declared the category
    call_command("noti_templates", stdout=io.StringIO())
    assert recipients.get_template("order_shipped").version == 1
    out = io.StringIO()
    call_command("noti_templates", stdout=out)  # an unchanged file makes no new version
    assert out.getvalue() == "order_shipped: unchanged\n"
    assert recipients.get_template("order_shipped").version == 1
    recipients.put_category("orders", {"channels": {"email": True, "sms": True}}, user=MEMBER)

    # when: a customer signs up, then changes their e-mail address
    get_user_model().objects.filter(username="ada").delete()  # left by an interrupted run
    user = get_user_model().objects.create_user("ada", email="ada@example.com", first_name="Ada")
    rid = str(user.pk)
    # then: the post_save signal made their profile, and keeps it in step
    profile = recipients.get(rid)
    assert profile.addresses == {"email": ("ada@example.com",)}
    assert profile.attributes == {"name": "Ada"}
    recipients.update(rid, {"addresses": {"push": "fcm-token-42"}})  # set by another system
    user.email = "ada@example.org"
    user.save()
    assert recipients.get(rid).addresses == {"email": ("ada@example.org",), "push": ("fcm-token-42",)}

    # when: their order is marked shipped through the view
    order = Order.objects.create(user=user, item="blue teapot")
    with _intake_task_ids() as tasks:
        response = orders_client.post(f"/orders/{order.pk}/shipped/")
        assert response.status_code == 200 and response.json() == {"order": order.pk, "notified": "recipient"}
        # and saved (still shipped) once more: the same idempotency key, no second notice
        order.refresh_from_db()
        assert order.shipped
        order.save()
    # then: noti's worker rendered the template for them and sent one e-mail
    notice_ids = [app.AsyncResult(task_id).get(timeout=20) for task_id in tasks]
    assert len(notice_ids) == 2 and notice_ids[0] == notice_ids[1]
    notice = noti.get_notice(notice_ids[0])
    assert {e.channel: e.state for e in notice.entries} == {"email": "queued", "sms": "noaddress"}
    assert (notice.recipient, notice.template, notice.category) == (rid, "order_shipped", "orders")
    [email] = _delivered(rt, 1)
    assert (email["type"], email["target"]) == ("email", "ada@example.org")
    assert email["fields"]["subject"] == f"Order {order.pk} has shipped"
    assert email["fields"]["text"] == f"Hello Ada,\n\nyour blue teapot (order {order.pk}) is on its way."
    assert rt.store.get(email["id"]).parent == notice.id

    # when: the customer is deleted
    user.delete()
    # then: the post_delete signal erased the profile; the sent record is kept, masked
    with pytest.raises(noti.NotFound):
        recipients.get(rid)
    record = rt.store.get(email["id"])
    assert record.target != "ada@example.org" and record.fields == {}


def test_django_a_bad_template_file_or_an_address_noti_refuses_stores_nothing(
    orders_client: Any,
    rt: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from django.contrib.auth import get_user_model
    from django.core.management import CommandError, call_command
    from orders.management.commands import noti_templates  # type: ignore[import-not-found]

    # a template file the sandbox cannot compile: the deploy step fails, naming it and the code
    (tmp_path / "order_shipped.toml").write_text(
        'default_locale = "en"\n[channels.sms.en]\ntext = "{{ order"\n'
    )
    monkeypatch.setattr(noti_templates, "TEMPLATES", tmp_path)
    with pytest.raises(CommandError, match=r"order_shipped.toml: e\.cmd\.noti\.tmpl\.badsyntax"):
        call_command("noti_templates", stdout=io.StringIO())
    assert recipients.list_templates() == []

    # a user whose address noti refuses: Django saves them, noti keeps no profile, the log says why
    get_user_model().objects.filter(username="bob").delete()
    user = get_user_model().objects.create_user("bob", email="bob@")
    assert get_user_model().objects.filter(pk=user.pk).exists()
    with pytest.raises(noti.NotFound):
        recipients.get(str(user.pk))
    assert "e.cmd.noti.rcpt.badaddr" in caplog.text
    assert rt.redis.keys("noti:rcpt*") == []
    user.delete()


@pytest.mark.slow
def test_django_projects_own_worker_runs_its_task_that_notifies_and_noti_leaves_that_worker_alone(
    orders_client: Any,
    rt: Any,
    worker: Any,
    redis_url: str,
    host_broker: str,
    host_broker_client: redis.Redis,
    tmp_path: Path,
) -> None:
    from django.conf import settings
    from orders.models import Order

    # given: the project's own worker (`celery -A proj worker`) in a Django deployment's
    # environment: CELERY_BROKER_URL names the project's broker, NOTI_REDIS_URL noti's
    env = {
        **os.environ,
        **BASE_ENV,
        "NOTI_REDIS_URL": redis_url,
        "DJANGO_SETTINGS_MODULE": "proj.settings",
        "ORDERS_DB_PATH": str(settings.DATABASES["default"]["NAME"]),
        "PROJ_BROKER_URL": host_broker,
        "CELERY_BROKER_URL": host_broker,
        "PYTHONPATH": os.pathsep.join([str(DJANGO_DIR), str(ROOT)]),
    }
    args = ("worker", "-P", "solo", "-l", "INFO", "--without-mingle", "--without-gossip", "-n", "host@%h")
    host = CeleryProcess(env, *args, "-I", "tests.host_worker_probe", app="proj", cwd=DJANGO_DIR, name="host")
    try:
        wait_until(lambda: "ready." in host.output() or not host.alive(), timeout=60)
        assert host.alive(), host.output()[-3000:]
        order = Order.objects.create(phone=PHONE, item="mug")
        report = tmp_path / "host-worker.json"

        # when: the project's task runs in its worker and notifies through noti
        client = Celery("client", broker=host_broker, set_as_current=False)
        try:
            client.send_task("orders.tasks.remind_unshipped", args=[order.pk])
            client.send_task("probe.report", args=[str(report)])
        finally:
            client.close()

        # then: noti's worker sends the SMS from noti's Redis
        [sms] = _delivered(rt, 1)
        assert (sms["target"], sms["fields"]["text"]) == (PHONE, f"Order {order.pk} ships soon: mug")
        # and the project's worker is the project's: its app, its broker, none of noti's tasks,
        # hooks or signal receivers, nothing frozen, and noti's messages never on its broker
        facts = wait_until(lambda: report.exists() and json.loads(report.read_text() or "null"), timeout=30)
    finally:
        host.stop()
    assert facts["current_app"] == "proj"
    assert facts["broker_url"] == host_broker
    assert facts["noti_tasks_in_host_app"] == []
    assert facts["in_noti_worker"] is False
    assert facts["frozen_objects"] == 0
    assert not [r for r in facts["signal_receivers"] if r.split(":")[1].startswith(("noti.", "redbeat."))]
    log = host.output()
    assert "orders.tasks.remind_unshipped" in log and "Traceback" not in log, log[-3000:]
    assert "noti ignores" not in log
    assert not [key for key in host_broker_client.keys() if key.startswith(b"noti.")]


# --- Flask --------------------------------------------------------------------------------


@pytest.fixture
def flask_client(redis_url: str, host_broker: str, host_broker_client: redis.Redis) -> Iterator[Any]:
    """A test client of the Flask example's app, its own Celery app on the host broker."""
    with _process_state_restored(FLASK_DIR):
        from accounts import create_app  # type: ignore[import-not-found]

        app = create_app({"TESTING": True, "CELERY": {"broker_url": host_broker, "task_ignore_result": True}})
        try:
            yield app.test_client()
        finally:
            app.extensions["celery"].close()
            for name in [n for n in sys.modules if n == "accounts" or n.startswith("accounts.")]:
                del sys.modules[name]


def test_flask_signup_emails_through_the_python_api(flask_client: Any, rt: Any, worker: Any) -> None:
    response = flask_client.post("/signup", json={"email": "ada@example.com", "name": "Ada"})

    assert response.status_code == 201
    record_id = response.get_json()["notification"]
    assert noti.get(record_id).target == "ada@example.com"
    [email] = _delivered(rt, 1)
    assert (email["id"], email["type"], email["target"]) == (record_id, "email", "ada@example.com")
    assert (email["fields"]["subject"], email["fields"]["text"]) == ("Welcome!", "Hello Ada, welcome aboard.")


def test_flask_signup_answers_400_for_an_address_noti_refuses(flask_client: Any, rt: Any) -> None:
    response = flask_client.post("/signup", json={"email": "not an address", "name": "Ada"})

    assert response.status_code == 400
    assert response.get_json()["error"] == "e.cmd.noti.add.badtarget"
    assert noti.list_notifications() == []


def test_flask_login_code_is_sent_by_the_worker_from_the_celery_task(
    flask_client: Any, rt: Any, worker: Any, host_broker_client: redis.Redis
) -> None:
    response = flask_client.post("/login-code", json={"phone": PHONE})

    assert response.status_code == 202
    assert response.get_json()["task"]
    [sms] = _delivered(rt, 1)
    assert (sms["type"], sms["target"]) == ("sms", PHONE)
    assert re.fullmatch(r"Your login code is \d{6}", sms["fields"]["text"])
    assert host_broker_client.dbsize() == 0
