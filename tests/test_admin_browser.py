"""The admin page in a real browser: headless Chromium (Debian's, through its chromedriver)
driven by Selenium, against a real ``noti serve``, a real Celery worker and a fake Twilio that
pushes its status callbacks to that server.

An operator logs in with a token, finds the failed notification by its phone number, opens it
and reads each attempt in its timeline, retries its dead letter and watches it be sent and
delivered; the pages read the same with JavaScript off;
markup in a record shows as text and runs nothing.

``ADMIN_SCREENSHOT=docs/img/admin-page.png`` makes the first test save the record's page
there (the picture in the documentation).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from noti.core.record import Status
from tests.admin_browser import chrome_session, require_browser, wait_for
from tests.conftest import ADMIN, ALICE, MEMBER, serving_api, wait_until
from tests.fakes.twilio import TwilioFake, error_reply
from tests.servers import ApiProcess, free_port
from tests.sms_vendors import TWILIO, US_PHONE
from tests.test_receipt_flows import _toml

pytestmark = [pytest.mark.integration, pytest.mark.slow]

XSS = '<script>alert("x")</script><img src=x onerror=alert(1)>'


@pytest.fixture(scope="module")
def twilio() -> Iterator[TwilioFake]:
    require_browser()  # before anything is started
    with TWILIO.fake() as fake:
        yield fake


@pytest.fixture(scope="module")
def setup(
    twilio: TwilioFake, redis_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """``noti serve`` with SMS through Twilio (its status callbacks posted back to this
    server); the settings an in-process worker is given to match."""
    port = free_port()
    public = f"http://127.0.0.1:{port}"
    settings: dict[str, Any] = {
        "providers": {"tw": TWILIO.options(twilio.url, status_callback=f"{public}/v1/receipts/tw")},
        "channels": {"sms": {"provider": "tw"}},
    }
    config = tmp_path_factory.mktemp("admin") / "noti.toml"
    config.write_text(
        _toml(settings["providers"], "providers")
        + _toml(settings["channels"], "channels")
        + '[provider_grants]\n"*" = ["tw"]\n'
    )
    with serving_api(redis_url, config, port=port, NOTI_PUBLIC_URL=public) as api:
        yield {"api": api, **settings}


@pytest.fixture
def stage(rt: Any, worker: Any, configure: Any, setup: dict[str, Any], twilio: TwilioFake) -> Any:
    """This process's worker configured as the server is (configured after ``rt`` and the
    worker: the runtime configured last is the one used), two attempts a record, Twilio's
    answers reset."""
    twilio.reset()
    twilio.send_refusal = None
    twilio.receipt_delay_s, twilio.auto_receipts = 0.0, True
    return configure(
        providers=setup["providers"],
        channels=setup["channels"],
        retry_max=2,
        retry_seconds=0.05,
        pump_interval_s=0.05,
        receipt_poll_interval_s=3600,
    )


def api_token(rt: Any, user: str) -> str:
    plain, _ = rt.tokens.add(user, acting=ADMIN)
    return str(plain)


def post_sms(api: ApiProcess, token: str, text: str) -> str:
    answer = httpx.post(
        f"{api.url}/v1/notifications",
        json={"type": "sms", "to": US_PHONE, "text": text},
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    assert answer.status_code == 201, answer.text
    return str(answer.json()["id"])


def log_in(driver: Any, base: str, token: str, path: str = "/admin/") -> None:
    """Open ``path`` (the login form, with no session), paste ``token``, submit."""
    from selenium.webdriver.common.by import By

    driver.get(base + path)
    assert driver.find_element(By.TAG_NAME, "h1").text == "Log in"
    driver.find_element(By.ID, "token").send_keys(token)
    driver.find_element(By.ID, "login").click()
    wait_for(lambda: driver.find_elements(By.ID, "whoami"), what="the page after logging in")


def events_of(driver: Any) -> list[str]:
    """The events of the record's timeline, oldest first, as its page lists them."""
    from selenium.webdriver.common.by import By

    rows = driver.find_elements(By.CSS_SELECTOR, "#timeline tbody tr")
    return [str(row.find_elements(By.TAG_NAME, "td")[1].text) for row in rows]


def text_of(driver: Any, element_id: str) -> str:
    from selenium.webdriver.common.by import By

    found = driver.find_elements(By.ID, element_id)
    return str(found[0].text) if found else ""


def test_an_operator_finds_a_failed_sms_retries_its_dead_letter_and_watches_it_delivered(
    stage: Any, setup: dict[str, Any], twilio: TwilioFake, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    api: ApiProcess = setup["api"]
    # given an SMS of alice's that Twilio refused until its attempts ran out
    twilio.send_refusal = error_reply(30003)
    record_id = post_sms(api, api_token(stage, ALICE), "Your code is 4321")
    wait_until(lambda: stage.store.get(record_id).status is Status.FAILED)
    with chrome_session() as driver:
        # when a root member logs in with a token
        log_in(driver, api.url, api_token(stage, MEMBER))
        assert text_of(driver, "whoami").startswith(f"{MEMBER} (root member)")
        assert int(text_of(driver, "dead-letters")) >= 1
        # and looks for the phone number
        driver.get(f"{api.url}/admin/notifications")
        driver.find_element(By.ID, "to").send_keys(US_PHONE)
        Select(driver.find_element(By.NAME, "status")).select_by_visible_text("failed")
        driver.find_element(By.ID, "search-button").click()
        wait_for(lambda: "to=%2B1415" in driver.current_url, what="the search's page")
        rows = driver.find_elements(By.CSS_SELECTOR, "#records tbody tr")
        assert [row.find_element(By.TAG_NAME, "a").text for row in rows] == [record_id]
        assert US_PHONE in rows[0].text
        # and opens it: failed, each attempt in its timeline, its dead letter
        rows[0].find_element(By.LINK_TEXT, record_id).click()
        wait_for(lambda: text_of(driver, "status") == "failed", what="the record's page")
        attempts = driver.find_elements(By.CSS_SELECTOR, "#timeline tr.ev-attempt")
        assert len(attempts) == stage.store.get(record_id).retry_max
        assert all("provider tw" in a.text and "30003" in a.text for a in attempts), [
            a.text for a in attempts
        ]
        assert events_of(driver)[-2:] == ["failed", "dead_letter"]
        assert "exhausted" in text_of(driver, "letter")
        # when Twilio takes messages again and the dead letter is retried
        twilio.send_refusal = None
        driver.find_element(By.ID, "retry").click()
        wait_for(lambda: text_of(driver, "retried"), what="the retried notice")

        # then reloading shows it sent, then delivered (Twilio's status callback)
        def delivered() -> bool:
            driver.refresh()
            return text_of(driver, "status") == "sent" and text_of(driver, "delivery") == "delivered"

        wait_for(delivered, timeout=30, what="the record sent and delivered")
        # its timeline goes on: put back by the re-drive, sent through Twilio, Twilio's receipts
        after = events_of(driver)
        assert after[after.index("dead_letter") + 1 :][:4] == ["requeued", "claimed", "attempt", "sent"], (
            after
        )
        assert after[-1] == "receipt"
        record = stage.store.get(record_id)
        assert record.status is Status.DONE and record.sent_by == "tw" and record.retry == 0
        assert [m["to"] for m in twilio.messages.values()] == [US_PHONE]
        # and the dead letter is gone
        driver.get(f"{api.url}/admin/dead")
        assert text_of(driver, "none") == "No dead letters."
        driver.set_window_size(1400, 1300)  # the whole timeline in the picture
        driver.get(f"{api.url}/admin/notifications/{record_id}")
        picture = tmp_path / "admin-page.png"
        assert driver.save_screenshot(str(picture)) and picture.stat().st_size > 10_000
        wanted = os.environ.get("ADMIN_SCREENSHOT")
        if wanted:
            shutil.copyfile(picture, wanted)


def test_every_page_reads_with_javascript_off(stage: Any, setup: dict[str, Any], twilio: TwilioFake) -> None:
    from selenium.webdriver.common.by import By

    api: ApiProcess = setup["api"]
    twilio.send_refusal = error_reply(30003)
    record_id = post_sms(api, api_token(stage, ALICE), "Read me without scripts")
    wait_until(lambda: stage.store.get(record_id).status is Status.FAILED)
    with chrome_session(javascript=False) as driver:
        # the browser runs no page script
        driver.get(
            "data:text/html,<p id=p>off</p><script>document.getElementById('p').textContent='on'</script>"
        )
        assert text_of(driver, "p") == "off"
        # logging in is a plain form post
        log_in(driver, api.url, api_token(stage, ADMIN), path="/admin/notifications")
        assert driver.current_url.endswith("/admin/notifications")
        assert record_id in driver.find_element(By.ID, "records").text
        driver.get(f"{api.url}/admin/")
        assert int(text_of(driver, "records-failed")) >= 1 and text_of(driver, "counter-added")
        driver.get(f"{api.url}/admin/notifications/{record_id}")
        assert text_of(driver, "status") == "failed" and "Read me without scripts" in text_of(
            driver, "content"
        )
        for path, element in (
            ("/admin/dead", "letters"),
            ("/admin/held", "none-waiting"),
            ("/admin/suppressions", "none"),
            ("/admin/tokens", "tokens"),
        ):
            driver.get(api.url + path)
            assert text_of(driver, element), path


def test_markup_in_a_record_shows_as_text_and_runs_nothing(
    stage: Any, setup: dict[str, Any], twilio: TwilioFake
) -> None:
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By

    api: ApiProcess = setup["api"]
    alice = api_token(stage, ALICE)
    record_id = post_sms(api, alice, XSS)
    wait_until(lambda: stage.store.get(record_id).status is Status.DONE)
    with chrome_session() as driver:
        log_in(driver, api.url, alice, path=f"/admin/notifications/{record_id}")
        cell = driver.find_element(By.CSS_SELECTOR, "#content td.content")
        assert cell.text == XSS
        assert driver.find_elements(By.CSS_SELECTOR, "main img, main script") == []
        with pytest.raises(NoAlertPresentException):
            driver.switch_to.alert.text  # noqa: B018 - raises when no alert opened
        driver.get(f"{api.url}/admin/notifications")
        assert XSS not in driver.page_source and record_id in driver.page_source
