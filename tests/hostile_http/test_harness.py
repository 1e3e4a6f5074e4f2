"""The suite's own instruments can fail: the digest sees every change but the ones it
documents, and the leak scan finds a secret in an answer or a log without repeating it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from tests.hostile_http.harness import AnswerLog, Secrets, changes, digest, id_free, leaks

#: A database of these tests' own (the deployment's is DB 9).
SELF_DB = 10
TOKEN_KEY = "noti:token:" + "ab" * 32


@pytest.fixture
def db(redis_server: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(f"{redis_server}/{SELF_DB}")
    client.flushdb()
    client.hset("noti:rec:1", mapping={"noti_st": "1", "noti_c": "alice"})
    client.zadd("noti:idx:all", {"1": 1})
    client.hset(TOKEN_KEY, mapping={"user": "alice", "cap": "", "created_ms": "1"})
    yield client
    client.flushdb()
    client.close()


@pytest.mark.parametrize(
    ("change", "key"),
    [
        (lambda c: c.hset("noti:rec:1", "noti_st", "-1"), "noti:rec:1"),
        (lambda c: c.zadd("noti:idx:all", {"2": 2}), "noti:idx:all"),
        (lambda c: c.set("noti:idem:alice:k", "1"), "noti:idem:alice:k"),
        (lambda c: c.expire("noti:rec:1", 3600), "noti:rec:1"),
        (lambda c: c.delete("noti:idx:all"), "noti:idx:all"),
        (lambda c: c.hset(TOKEN_KEY, "revoked_ms", "5"), TOKEN_KEY),
        (lambda c: c.hset(TOKEN_KEY, "user", "boss"), TOKEN_KEY),
        (lambda c: c.rpush("noti.sms", "a message"), "noti.sms"),
    ],
    ids=["value", "member", "new-key", "expiry", "removed", "token-revoked", "token-user", "queued"],
)
def test_the_digest_sees_a_change(db: redis.Redis, change: object, key: str) -> None:
    before = digest(db)
    change(db)  # type: ignore[operator]
    assert key in changes(before, digest(db))


@pytest.mark.parametrize(
    "change",
    [
        lambda c: c.hset(TOKEN_KEY, "used_ms", "123"),
        lambda c: c.hset(TOKEN_KEY, mapping={"bt": "0.5", "bts": "99"}),
        lambda c: c.hset("noti:workers", "w1", "{}"),
        lambda c: c.set("noti:lock:pump", "x", px=5000),
        lambda c: c.set("unacked_mutex", "x"),
        lambda c: c.zadd("_kombu.binding_deadlines", {"x": 1}),
    ],
    ids=["token-used", "token-bucket", "heartbeat", "lock", "kombu-mutex", "kombu-deadlines"],
)
def test_the_digest_leaves_out_what_it_documents(db: redis.Redis, change: object) -> None:
    before = digest(db)
    change(db)  # type: ignore[operator]
    assert digest(db) == before


def test_the_digest_of_a_hash_table_does_not_change_on_a_read(db: redis.Redis) -> None:
    # long fields make Redis keep a hash (and a set) as a hash table, whose DUMP follows its
    # table order: a read takes a rehash step and can change it, the content unchanged
    for n in range(9):
        db.hset("noti:dlv:vid", f"mailses:{n:02d}" + "x" * 64, f"rec{n}")
        db.sadd("noti:suppressed:email", f"{n:02d}" + "a" * 70 + "@example.org")
    before = digest(db)
    for _ in range(20):
        db.hget("noti:dlv:vid", "nope")
        db.sismember("noti:suppressed:email", "nope")
    assert digest(db) == before
    db.hset("noti:dlv:vid", "mailses:00" + "x" * 64, "another")
    db.srem("noti:suppressed:email", "00" + "a" * 70 + "@example.org")
    assert set(changes(before, digest(db))) == {"noti:dlv:vid", "noti:suppressed:email"}


SECRET = "xik-" + "5e" * 16


def test_the_leak_scan_finds_a_secret_in_a_log_and_does_not_repeat_it(tmp_path: Path) -> None:
    secrets = Secrets()
    secrets.add("X-Internal-Key of hooks", SECRET)
    clean, dirty = tmp_path / "clean.log", tmp_path / "dirty.log"
    clean.write_text('INFO: 127.0.0.1 - "POST /v1/receipts/ali?key=wrong HTTP/1.1" 403\n')
    dirty.write_text(f'INFO: 127.0.0.1 - "POST /v1/receipts/ali?key={SECRET} HTTP/1.1" 200\n')
    assert leaks(secrets, [], [clean]) == []
    [found] = leaks(secrets, [("GET /x", "200\n\n{}")], [clean, dirty])
    assert "X-Internal-Key of hooks in dirty.log" in found and SECRET not in found


def test_a_whsec_secret_is_looked_for_without_its_prefix_too() -> None:
    secrets = Secrets()
    secrets.add("whsec of hooks", "whsec_" + "QUJD" * 8)
    assert secrets.found_in("key=" + "QUJD" * 8) == ["whsec of hooks (key)"]


def test_an_answer_showing_a_secret_fails_when_it_arrives() -> None:
    secrets = Secrets()
    secrets.add("token alice", "noti_" + "a" * 43)
    log = AnswerLog(secrets)
    request = httpx.Request("GET", "http://noti.test/v1/notifications")
    log.hook(httpx.Response(200, json={"ok": True}, request=request))
    with pytest.raises(AssertionError, match="token alice"):
        log.hook(httpx.Response(200, text="noti_" + "a" * 43, request=request))
    assert len(log.answers) == 2
    # what the client sent is no answer: a case may send a secret on purpose
    sent = httpx.Request("GET", "http://noti.test/v1/notifications?access_token=noti_" + "a" * 43)
    log.hook(httpx.Response(401, json={"error": {}}, request=sent))
    assert "noti_" + "a" * 43 not in log.answers[-1][0] + log.answers[-1][1]


def test_two_answers_about_different_ids_compare_equal_without_them() -> None:
    one = '{"error": {"code": "e.cmd.noti.not_found", "message": "no notification \'01a\'"}}'
    two = '{"error": {"code": "e.cmd.noti.not_found", "message": "no notification \'01b\'"}}'
    assert id_free(one, "01a") == id_free(two, "01b") and one != two
