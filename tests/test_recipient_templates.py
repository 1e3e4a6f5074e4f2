"""Named, versioned templates (noti.recipients.templates) on a real Redis: put, get, versions,
list, delete; the locale fallback; rendering per channel (SMS vendor parameters, WeChat
content); the sandbox's refusals under the templates' codes; bad documents and names refused
with nothing stored; the per-process cache; template files."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from noti.core.keys import Keys
from noti.errors import InvalidInput, NotFound, StoreUnavailable
from noti.events.limits import OUTPUT_MAX
from noti.recipients._cache import LruCache
from noti.recipients._document import DOC_MAX_BYTES, LOCALES_MAX, STRINGS_MAX
from noti.recipients._variants import SOURCE_MAX
from noti.recipients.templates import (
    FILE_MAX_BYTES,
    TemplateStore,
    check_document,
    load_file,
)
from tests.conftest import ALICE, BOB

pytestmark = pytest.mark.bounds

TMPL = "e.cmd.noti.tmpl"
SHIPPED: dict[str, Any] = {
    "default_locale": "en",
    "description": "an order left the warehouse",
    "channels": {
        "sms": {
            "en": {"text": "Order {{ order }} shipped"},
            "zh": {"params": {"order": "{{ order }}", "count": 2}, "template": {"aliyun": "SMS_1234"}},
        },
        "email": {
            "en": {"subject": "Order {{ order }}", "text": "Hi {{ recipient.id }}", "html": "<p>…</p>"}
        },
        "push": {"en": {"title": "Shipped", "body": "Order {{ order }}", "data": {"order": "{{ order }}"}}},
        "weixin": {
            "zh-hans": {
                "tmpl": "TEMPLATE_ID",
                "pnb": "wx-account",
                "content": {"first": {"value": "{{ order }}"}},
                "url": "https://shop.example.cn/o/{{ order }}",
            }
        },
        "chat": {"en": {"text": "**Order {{ order }}** shipped", "format": "markdown"}},
    },
}


@pytest.fixture
def store(rt: Any) -> TemplateStore:
    return TemplateStore(rt.redis, rt.keys)


def sms(text: str, **more: Any) -> dict[str, Any]:
    """A document with one SMS variant in English."""
    return {"default_locale": "en", "channels": {"sms": {"en": {"text": text, **more}}}}


def stored_keys(store: TemplateStore) -> list[str]:
    return sorted(store.redis.scan_iter(match=f"{store.keys.prefix}tmpl*"))


def code_of(call: Any) -> str:
    with pytest.raises(InvalidInput) as caught:
        call()
    return caught.value.code


# --- put, get, versions, list, delete -----------------------------------------------------------


def test_each_put_is_a_new_version_and_old_versions_stay_readable(store: TemplateStore) -> None:
    # given
    assert store.put(ALICE, "shipped", sms("v1 {{ order }}")) == 1
    first = store.redis.hgetall(store.keys.template(ALICE, "shipped"))
    # when
    assert store.put(ALICE, "shipped", sms("v2 {{ order }}")) == 2
    # then
    assert store.current_version(ALICE, "shipped") == 2
    assert store.get(ALICE, "shipped").render("sms", "en", {"order": 7}) == {"text": "v2 7"}
    assert store.get(ALICE, "shipped", version=1).render("sms", "en", {"order": 7}) == {"text": "v1 7"}
    assert store.get(ALICE, "shipped", version=2).version == 2
    held = store.redis.hgetall(store.keys.template(ALICE, "shipped"))
    assert sorted(held) == ["ct", "current", "lm", "v1", "v2"]
    assert held["current"] == "2" and held["ct"] == first["ct"] and int(held["lm"]) >= int(first["lm"])
    assert held["v1"] == first["v1"]  # a version never changes once written
    assert json.loads(held["v2"]) == sms("v2 {{ order }}")
    assert store.redis.zrange(store.keys.templates(ALICE), 0, -1, withscores=True) == [
        ("shipped", float(first["ct"]))
    ]


@pytest.mark.parametrize("version", [3, 0, -1, "x", 1.0, True, "1 ", "99999999999999999999"])
def test_a_version_never_written_is_not_found(store: TemplateStore, version: Any) -> None:
    store.put(ALICE, "shipped", sms("hi"))
    store.put(ALICE, "shipped", sms("hi again"))
    with pytest.raises(NotFound) as caught:
        store.get(ALICE, "shipped", version=version)
    assert caught.value.code == f"{TMPL}.not_found"


def test_a_version_may_be_asked_for_by_its_digits(store: TemplateStore) -> None:
    store.put(ALICE, "shipped", sms("one"))
    store.put(ALICE, "shipped", sms("two"))
    assert store.get(ALICE, "shipped", version="1").render("sms", "en", {}) == {"text": "one"}  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("owner", "name"), [(BOB, "shipped"), (ALICE, "other"), ("a:b", "x"), (ALICE, "a:b")]
)
def test_a_template_is_its_owners_alone(store: TemplateStore, owner: str, name: str) -> None:
    store.put(ALICE, "shipped", sms("hi"))
    with pytest.raises(NotFound) as caught:
        store.get(owner, name)
    assert caught.value.code == f"{TMPL}.not_found"
    assert store.current_version(owner, name) is None
    assert store.delete(owner, name) is False
    assert store.current_version(ALICE, "shipped") == 1


def test_list_shows_each_template_as_its_current_version_oldest_first(store: TemplateStore) -> None:
    # given
    store.put(ALICE, "shipped", SHIPPED)
    store.put(ALICE, "welcome", sms("Welcome"))
    store.put(ALICE, "welcome", {"default_locale": "fr", "channels": {"chat": {"fr": {"text": "Salut"}}}})
    store.put(BOB, "bobs", sms("bob"))
    # when
    listed = store.list(ALICE)
    # then
    assert [(t.name, t.version) for t in listed] == [("shipped", 1), ("welcome", 2)]
    shipped, welcome = listed
    assert shipped.channels == ("sms", "email", "push", "weixin", "chat")
    assert shipped.locales == ("en", "zh", "zh-Hans")
    assert (shipped.default_locale, shipped.description) == ("en", "an order left the warehouse")
    assert (welcome.channels, welcome.locales, welcome.description) == (("chat",), ("fr",), "")
    assert welcome.modified_ms >= welcome.created_ms > 0
    assert [t.name for t in store.list(BOB)] == ["bobs"]
    assert store.list("carol") == [] and store.list("not a user") == []


def test_delete_removes_every_version_and_a_new_put_starts_again_at_one(store: TemplateStore) -> None:
    # given
    store.put(ALICE, "shipped", sms("one"))
    store.put(ALICE, "shipped", sms("two"))
    store.put(ALICE, "kept", sms("kept"))
    # when
    assert store.delete(ALICE, "shipped") is True
    # then
    assert store.delete(ALICE, "shipped") is False
    assert stored_keys(store) == [store.keys.template(ALICE, "kept"), store.keys.templates(ALICE)]
    with pytest.raises(NotFound):
        store.get(ALICE, "shipped")
    assert store.cached(ALICE, "shipped", 1) is None
    assert store.put(ALICE, "shipped", sms("three")) == 1
    assert store.get(ALICE, "shipped").render("sms", "en", {}) == {"text": "three"}


def test_concurrent_puts_each_get_their_own_version(store: TemplateStore) -> None:
    # given
    versions: list[int] = []

    def put_five(n: int) -> None:
        for i in range(5):
            versions.append(store.put(ALICE, "busy", sms(f"writer {n} put {i}")))

    # when
    writers = [threading.Thread(target=put_five, args=(n,)) for n in range(6)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    # then
    assert sorted(versions) == list(range(1, 31))
    held = store.redis.hgetall(store.keys.template(ALICE, "busy"))
    assert held["current"] == "30" and {f"v{n}" for n in range(1, 31)} <= set(held)
    assert len({held[f"v{n}"] for n in range(1, 31)}) == 30


def test_a_store_that_cannot_reach_redis_says_so() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = redis.Redis(port=port, decode_responses=True, retry=Retry(NoBackoff(), 0))
    down = TemplateStore(client, Keys())
    for call in (
        lambda: down.put(ALICE, "x", sms("hi")),
        lambda: down.get(ALICE, "x"),
        lambda: down.list(ALICE),
    ):
        with pytest.raises(StoreUnavailable):
            call()


# --- rendering ----------------------------------------------------------------------------------


def test_every_channel_renders_its_fields(store: TemplateStore) -> None:
    store.put(ALICE, "shipped", SHIPPED)
    template = store.get(ALICE, "shipped")
    values = {"order": "A7", "recipient": {"id": "42"}}
    assert template.render("sms", "en", values) == {"text": "Order A7 shipped"}
    assert template.render("email", "en", values) == {
        "subject": "Order A7",
        "text": "Hi 42",
        "html": "<p>…</p>",
    }
    assert template.render("push", "en", values) == {
        "title": "Shipped",
        "body": "Order A7",
        "data": {"order": "A7"},
    }
    assert template.render("chat", "en", values) == {"text": "**Order A7** shipped", "format": "markdown"}
    assert template.variables == {"order", "recipient"}
    assert template.channels == ("sms", "email", "push", "weixin", "chat")
    assert template.locales("weixin") == ("zh-Hans",) and template.locales("webhook") == ()


def test_sms_params_are_rendered_then_json_encoded_into_the_text_with_the_vendor_codes(
    store: TemplateStore,
) -> None:
    doc = {
        "default_locale": "zh",
        "channels": {
            "sms": {
                "zh": {
                    "params": {"order": "{{ order }}", "name": "{{ name }}", "count": 3, "price": 9.5},
                    "template": {"aliyun": "SMS_1234", "tencent": "1234567"},
                }
            }
        },
    }
    store.put(ALICE, "vendor", doc)
    fields = store.get(ALICE, "vendor").render("sms", "zh", {"order": 7, "name": '李 "小" 龙'})
    assert fields["text"] == '{"order":"7","name":"李 \\"小\\" 龙","count":3,"price":9.5}'
    assert json.loads(fields["text"]) == {"order": "7", "name": '李 "小" 龙', "count": 3, "price": 9.5}
    assert fields["template"] == {"aliyun": "SMS_1234", "tencent": "1234567"}
    # the codes handed out are the caller's own copy
    fields["template"]["aliyun"] = "changed"
    assert store.get(ALICE, "vendor").render("sms", "zh", {"order": 7, "name": "x"})["template"][
        "aliyun"
    ] == ("SMS_1234")


def test_weixin_content_renders_every_string_leaf_and_keeps_keys_and_other_values(
    store: TemplateStore,
) -> None:
    content = {
        "first": {"value": "Order {{ order }}", "color": "#173177"},
        "{{ order }}": {"value": "the key is not rendered"},
        "items": ["{{ items[0] }}", 2, True, None, {"deep": "{{ locale }}"}],
        "amount": {"value": 12.5},
    }
    doc = {
        "default_locale": "zh",
        "channels": {
            "weixin": {"zh": {"tmpl": "T1", "pnb": "shop", "content": content, "url": "https://x.cn/a"}}
        },
    }
    store.put(ALICE, "wx", doc)
    fields = store.get(ALICE, "wx").render("weixin", "zh", {"order": 7, "items": ["pen"]})
    assert fields == {
        "content": {
            "first": {"value": "Order 7", "color": "#173177"},
            "{{ order }}": {"value": "the key is not rendered"},
            "items": ["pen", 2, True, None, {"deep": "zh"}],
            "amount": {"value": 12.5},
        },
        "url": "https://x.cn/a",
        "tmpl": "T1",
        "pnb": "shop",
    }


def test_a_missing_variable_is_an_error_naming_it(store: TemplateStore) -> None:
    store.put(ALICE, "shipped", SHIPPED)
    template = store.get(ALICE, "shipped")
    with pytest.raises(InvalidInput) as caught:
        template.render("sms", "en", {"recipient": {"id": "42"}})
    assert caught.value.code == f"{TMPL}.missingvar"
    assert "'order' is undefined" in caught.value.message
    assert "template 'shipped' v1" in caught.value.message and "channels.sms.en.text" in caught.value.message
    with pytest.raises(InvalidInput) as caught:
        template.render("email", "en", {"order": 7, "recipient": {}})
    assert caught.value.code == f"{TMPL}.missingvar" and "'id'" in caught.value.message


def test_a_template_sees_the_locale_of_its_variant_unless_given_one(store: TemplateStore) -> None:
    store.put(
        ALICE, "loc", {"default_locale": "en", "channels": {"sms": {"zh-Hant": {"text": "{{ locale }}"}}}}
    )
    template = store.get(ALICE, "loc")
    assert template.render("sms", "zh-Hant", {}) == {"text": "zh-Hant"}
    assert template.render("sms", "zh_hant", {"locale": "zh-Hant-TW"}) == {"text": "zh-Hant-TW"}


@pytest.mark.parametrize(
    ("channel", "locale", "code"),
    [
        ("webhook", "en", "nochannel"),
        ("fax", "en", "nochannel"),
        ("sms", "fr", "nolocale"),
        ("sms", "!!", "nolocale"),
    ],
)
def test_rendering_a_variant_the_template_lacks_is_refused(
    store: TemplateStore, channel: str, locale: str, code: str
) -> None:
    store.put(ALICE, "shipped", SHIPPED)
    assert (
        code_of(lambda: store.get(ALICE, "shipped").render(channel, locale, {"order": 1})) == f"{TMPL}.{code}"
    )


# --- locale fallback ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("default", "locales", "wanted", "chosen"),
    [
        ("en", ["en", "zh", "zh-Hant", "zh-Hant-TW"], "zh-Hant-TW", "zh-Hant-TW"),
        ("en", ["en", "zh", "zh-Hant"], "zh-Hant-TW", "zh-Hant"),
        ("en", ["en", "zh"], "zh-Hant-TW", "zh"),
        ("en", ["en", "zh-Hans"], "zh-Hant-TW", "en"),
        ("en", ["en", "zh-Hant"], "zh_hant_tw", "zh-Hant"),
        ("en", ["en", "fr"], None, "en"),
        ("en", ["en", "fr"], "", "en"),
        ("en-US", ["en", "fr"], "de", "en"),
        ("en-US", ["en-US", "en"], "en-GB", "en"),
        ("en", ["fr"], "de", None),
    ],
)
def test_the_locale_falls_back_along_the_chain_then_to_the_default(
    store: TemplateStore, default: str, locales: list[str], wanted: str | None, chosen: str | None
) -> None:
    doc = {"default_locale": default, "channels": {"sms": {tag: {"text": tag} for tag in locales}}}
    store.put(ALICE, "hello", doc)
    template = store.get(ALICE, "hello")
    assert template.locale_for("sms", wanted) == chosen
    assert template.locale_for("email", wanted) is None
    if chosen is not None:
        assert template.render("sms", chosen, {}) == {"text": chosen}


def test_a_wanted_locale_that_is_not_a_tag_is_refused(store: TemplateStore) -> None:
    store.put(ALICE, "hello", sms("hi"))
    assert (
        code_of(lambda: store.get(ALICE, "hello").locale_for("sms", "zh-yue")) == "e.cmd.noti.rcpt.badlocale"
    )


# --- the sandbox --------------------------------------------------------------------------------

HUGE_LOOP = "{% for i in range(n) %}{% for j in range(n) %}{% endfor %}{% endfor %}"


@pytest.mark.parametrize(
    ("source", "values", "code", "when"),
    [
        ("{{ ''.__class__ }}", {}, "unsafe", "put"),
        ("{{ order.__class__.__mro__ }}", {}, "unsafe", "put"),
        ("{{ order['__class__'] }}", {}, "unsafe", "put"),
        ("{% include 'secrets.txt' %}", {}, "unsafe", "put"),
        ("{% import 'macros' as m %}", {}, "unsafe", "put"),
        ("{% extends 'base' %}", {}, "unsafe", "put"),
        ("{% macro m() %}x{% endmacro %}", {}, "unsafe", "put"),
        ("{{ lipsum() }}", {}, "unsafe", "put"),
        ("{{ order | pprint }}", {}, "unsafe", "put"),
        ("{{ order.encode() }}", {}, "unsafe", "put"),
        ("{{ 'x' * 10**9 }}", {}, "unsafe", "put"),
        ("{% for i in range(10**6) %}x{% endfor %}", {}, "unsafe", "put"),
        ("{{ '%99999999s' % 'x' }}", {}, "unsafe", "put"),
        ("{{ 1 / 0 }}", {}, "error", "put"),
        ("{{ order * 10**9 }}", {"order": "x"}, "unsafe", "render"),
        ("{{ order.update({'a': 1}) }}", {"order": {}}, "unsafe", "render"),
        (HUGE_LOOP, {"n": 1000}, "unsafe", "render"),
        ("{% for i in range(100) %}{{ pad }}{% endfor %}", {"pad": "x" * 1000}, "toobig", "render"),
        ("{{ order + 1 }}", {"order": "x"}, "error", "render"),
        ("{{ order", {}, "badsyntax", "put"),
        ("{% if order %}", {}, "badsyntax", "put"),
        ("{{ order | no_such_filter }}", {}, "badsyntax", "put"),
        ("{% if a %}" * 150 + "{% endif %}" * 150, {}, "badsyntax", "put"),
        ("{{ " + "(" * 300 + "a" + ")" * 300 + " }}", {}, "badsyntax", "put"),
        ("{% for a in b %}" * 25 + "{% endfor %}" * 25, {}, "badsyntax", "put"),
        ("x" * (SOURCE_MAX + 1), {}, "toobig", "put"),
    ],
)
def test_what_the_sandbox_refuses_is_refused_with_a_template_code(
    store: TemplateStore, source: str, values: dict[str, Any], code: str, when: str
) -> None:
    doc = {"default_locale": "en", "channels": {"chat": {"en": {"text": source}}}}
    if when == "put":
        assert code_of(lambda: store.put(ALICE, "evil", doc)) == f"{TMPL}.{code}"
        assert stored_keys(store) == []
    else:
        store.put(ALICE, "evil", doc)
        assert code_of(lambda: store.get(ALICE, "evil").render("chat", "en", values)) == f"{TMPL}.{code}"


def test_the_messages_name_templates_not_listeners(store: TemplateStore) -> None:
    with pytest.raises(InvalidInput) as caught:
        store.put(ALICE, "evil", sms("{% include 'x' %}"))
    assert "listener" not in caught.value.message and "channels.sms.en.text" in caught.value.message


def test_a_rendering_is_held_to_its_total_size(store: TemplateStore) -> None:
    # each value stays under the sandbox's limit, together they pass the variant's
    block = "{% for i in range(60) %}{{ pad }}{% endfor %}"
    doc = {
        "default_locale": "en",
        "channels": {"webhook": {"en": {"content": {f"k{i}": block for i in range(9)}}}},
    }
    store.put(ALICE, "wide", doc)
    template = store.get(ALICE, "wide")
    assert template.render("webhook", "en", {"pad": "y"})["content"]["k8"] == "y" * 60
    pad = "x" * (OUTPUT_MAX // 60)
    assert code_of(lambda: template.render("webhook", "en", {"pad": pad})) == f"{TMPL}.toobig"


# --- bad documents and names: refused, nothing stored -------------------------------------------


def variant(channel: str, fields: Any, locale: str = "en") -> dict[str, Any]:
    return {"default_locale": "en", "channels": {channel: {locale: fields}}}


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"v": "x"}
    for _ in range(depth):
        value = {"v": value}
    return value


BAD_DOCS: dict[str, tuple[Any, str]] = {
    "a list": ([SHIPPED], "baddoc"),
    "a number": (5, "baddoc"),
    "null": (None, "baddoc"),
    "text that is not JSON": ("{not json", "baddoc"),
    "JSON text of a list": ("[1]", "baddoc"),
    "an unknown key": ({**sms("hi"), "owner": "bob"}, "baddoc"),
    "no default locale": ({"channels": sms("hi")["channels"]}, "baddoc"),
    "a bad default locale": ({**sms("hi"), "default_locale": "english"}, "baddoc"),
    "a default locale that is a number": ({**sms("hi"), "default_locale": 1}, "baddoc"),
    "no channels": ({"default_locale": "en"}, "baddoc"),
    "empty channels": ({"default_locale": "en", "channels": {}}, "baddoc"),
    "channels as a list": ({"default_locale": "en", "channels": [sms("hi")]}, "baddoc"),
    "an unknown channel": (variant("fax", {"text": "hi"}), "baddoc"),
    "a channel's name in capitals": (variant("SMS", {"text": "hi"}), "baddoc"),
    "a channel without variants": ({"default_locale": "en", "channels": {"sms": {}}}, "baddoc"),
    "a channel's variants as text": ({"default_locale": "en", "channels": {"sms": "hi"}}, "baddoc"),
    "a bad locale": (variant("sms", {"text": "hi"}, locale="english"), "baddoc"),
    "a locale twice": (
        {"default_locale": "en", "channels": {"sms": {"en-us": {"text": "a"}, "en_US": {"text": "b"}}}},
        "baddoc",
    ),
    "too many locales": (
        {
            "default_locale": "en",
            "channels": {"sms": {f"en-{n:03d}": {"text": "x"} for n in range(LOCALES_MAX + 1)}},
        },
        "toobig",
    ),
    "an empty variant": (variant("sms", {}), "baddoc"),
    "a variant as text": (variant("sms", "hi"), "baddoc"),
    "an unknown field": (variant("sms", {"text": "hi", "subject": "x"}), "baddoc"),
    "another channel's vendor keys": (variant("chat", {"text": "hi", "params": {"a": "b"}}), "baddoc"),
    "a required field missing": (variant("email", {"text": "hi"}), "baddoc"),
    "weixin without its template id": (variant("weixin", {"pnb": "p", "content": {"a": "b"}}), "baddoc"),
    "a text that is a number": (variant("sms", {"text": 5}), "baddoc"),
    "a text that is a list": (variant("sms", {"text": ["hi"]}), "baddoc"),
    "a constant SMS text too long": (variant("sms", {"text": "x" * 1001}), "baddoc"),
    "a constant subject of two lines": (variant("email", {"subject": "a\nb", "text": "t"}), "baddoc"),
    "a constant text with a NUL": (variant("chat", {"text": "a\x00b"}), "baddoc"),
    "a chat format that is not one": (variant("chat", {"text": "hi", "format": "html"}), "baddoc"),
    "a WeChat template id with a space": (
        variant("weixin", {"tmpl": "T 1", "pnb": "p", "content": {}}),
        "baddoc",
    ),
    "a WeChat template id as a number": (variant("weixin", {"tmpl": 7, "pnb": "p", "content": {}}), "baddoc"),
    "a WeChat content as text": (variant("weixin", {"tmpl": "T", "pnb": "p", "content": "{}"}), "baddoc"),
    "a constant WeChat url that is not http": (
        variant("weixin", {"tmpl": "T", "pnb": "p", "content": {}, "url": "javascript:alert(1)"}),
        "baddoc",
    ),
    "a push collapse key with a space": (variant("push", {"body": "b", "collapse": "a b"}), "baddoc"),
    "SMS params and text": (variant("sms", {"text": "hi", "params": {"a": "b"}}), "baddoc"),
    "SMS params empty": (variant("sms", {"params": {}}), "baddoc"),
    "SMS params as a list": (variant("sms", {"params": ["a"]}), "baddoc"),
    "an SMS param's bad name": (variant("sms", {"params": {"a b": "x"}}), "baddoc"),
    "an SMS param that is true": (variant("sms", {"params": {"a": True}}), "baddoc"),
    "an SMS param that is null": (variant("sms", {"params": {"a": None}}), "baddoc"),
    "an SMS param that is an object": (variant("sms", {"params": {"a": {"b": "c"}}}), "baddoc"),
    "too many SMS params": (variant("sms", {"params": {f"p{n}": "x" for n in range(33)}}), "baddoc"),
    "an SMS param that does not compile": (variant("sms", {"params": {"a": "{{ x"}}), "badsyntax"),
    "SMS vendor codes as text": (variant("sms", {"text": "hi", "template": "SMS_1"}), "baddoc"),
    "SMS vendor codes empty": (variant("sms", {"text": "hi", "template": {}}), "baddoc"),
    "an SMS vendor code with a space": (
        variant("sms", {"text": "hi", "template": {"aliyun": "SMS 1"}}),
        "baddoc",
    ),
    "an SMS vendor code too long": (
        variant("sms", {"text": "hi", "template": {"aliyun": "S" * 65}}),
        "baddoc",
    ),
    "an SMS vendor code empty": (variant("sms", {"text": "hi", "template": {"aliyun": ""}}), "baddoc"),
    "an SMS vendor code as a number": (
        variant("sms", {"text": "hi", "template": {"tencent": 1234}}),
        "baddoc",
    ),
    "an SMS provider name with a comma": (
        variant("sms", {"text": "hi", "template": {"a,b": "S1"}}),
        "baddoc",
    ),
    "an SMS provider name with a space": (
        variant("sms", {"text": "hi", "template": {"a b": "S1"}}),
        "baddoc",
    ),
    "too many SMS providers": (
        variant("sms", {"text": "hi", "template": {f"p{n}": "S1" for n in range(17)}}),
        "baddoc",
    ),
    "a JSON field's leaf that is a set": (variant("webhook", {"content": {"a": {1, 2}}}), "baddoc"),
    "a JSON field's leaf that is NaN": (variant("webhook", {"content": {"a": float("nan")}}), "baddoc"),
    "a JSON field nested too deeply": (variant("webhook", {"content": nested(70)}), "baddoc"),
    "a key that is not a string": (variant("webhook", {"content": {1: "a"}}), "baddoc"),
    "a lone surrogate in a template": (variant("sms", {"text": "{{ order }} \ud800"}), "baddoc"),
    "a lone surrogate in a key": (variant("webhook", {"content": {"\udc80": "a"}}), "baddoc"),
    "a description that is a number": ({**sms("hi"), "description": 5}, "baddoc"),
    "a description too long": ({**sms("hi"), "description": "d" * 1001}, "baddoc"),
    "too big": (variant("webhook", {"content": {"a": "x" * DOC_MAX_BYTES}}), "toobig"),
    "too big as JSON text": ('{"a": "' + "x" * (4 * DOC_MAX_BYTES) + '"}', "toobig"),
    "too many strings": (
        variant("webhook", {"content": {f"k{n}": "x" for n in range(STRINGS_MAX + 1)}}),
        "toobig",
    ),
}


@pytest.mark.parametrize(("doc", "code"), list(BAD_DOCS.values()), ids=list(BAD_DOCS))
def test_a_bad_document_is_refused_and_nothing_is_stored(store: TemplateStore, doc: Any, code: str) -> None:
    # given: a version 1 already stored under the name
    store.put(ALICE, "shipped", SHIPPED)
    before = store.redis.hgetall(store.keys.template(ALICE, "shipped"))
    # when
    assert code_of(lambda: store.put(ALICE, "shipped", doc)) == f"{TMPL}.{code}"
    assert code_of(lambda: store.put(ALICE, "fresh", doc)) == f"{TMPL}.{code}"
    # then
    assert store.redis.hgetall(store.keys.template(ALICE, "shipped")) == before
    assert stored_keys(store) == [store.keys.template(ALICE, "shipped"), store.keys.templates(ALICE)]
    assert code_of(lambda: check_document(doc)) == f"{TMPL}.{code}"


@pytest.mark.parametrize(
    ("owner", "name", "code"),
    [
        (ALICE, "", f"{TMPL}.badname"),
        (ALICE, "-shipped", f"{TMPL}.badname"),
        (ALICE, ".hidden", f"{TMPL}.badname"),
        (ALICE, "a:b", f"{TMPL}.badname"),
        (ALICE, "a b", f"{TMPL}.badname"),
        (ALICE, "a*", f"{TMPL}.badname"),
        (ALICE, "shipped\n", f"{TMPL}.badname"),
        (ALICE, "ü", f"{TMPL}.badname"),
        (ALICE, "x" * 129, f"{TMPL}.badname"),
        (ALICE, None, f"{TMPL}.badname"),
        ("", "shipped", "e.cmd.noti.baduser"),
        ("a:b", "shipped", "e.cmd.noti.baduser"),
        (None, "shipped", "e.cmd.noti.baduser"),
    ],
)
def test_a_bad_name_or_owner_is_refused_and_nothing_is_stored(
    store: TemplateStore, owner: Any, name: Any, code: str
) -> None:
    assert code_of(lambda: store.put(owner, name, SHIPPED)) == code
    assert stored_keys(store) == []


def test_the_longest_name_is_taken(store: TemplateStore) -> None:
    assert store.put(ALICE, "A" + "b_.-9" * 25 + "xx", sms("hi")) == 1


def test_a_document_may_be_json_text_and_is_stored_with_canonical_locales(store: TemplateStore) -> None:
    text = json.dumps(
        {"default_locale": "ZH_hant", "description": "", "channels": {"sms": {"zh_hant_tw": {"text": "hi"}}}}
    )
    assert check_document(text) == {
        "default_locale": "zh-Hant",
        "channels": {"sms": {"zh-Hant-TW": {"text": "hi"}}},
    }
    store.put(ALICE, "canon", text)
    template = store.get(ALICE, "canon")
    assert template.document() == check_document(text) and template.default_locale == "zh-Hant"
    template.document()["channels"].clear()  # a copy
    assert template.locales("sms") == ("zh-Hant-TW",)


# --- the cache ----------------------------------------------------------------------------------


def test_the_cache_gives_the_same_compiled_template_per_version(store: TemplateStore) -> None:
    # given
    store.put(ALICE, "shipped", sms("one"))
    first = store.get(ALICE, "shipped")
    # when
    store.put(ALICE, "shipped", sms("two"))
    second = store.get(ALICE, "shipped")
    # then
    assert store.get(ALICE, "shipped", version=1) is first
    assert store.get(ALICE, "shipped") is second is store.cached(ALICE, "shipped", 2)
    assert second is not first and store.cached(ALICE, "shipped", 1) is first
    assert store.cached(ALICE, "shipped", 3) is None and store.cached(BOB, "shipped", 1) is None


def test_cached_asks_nothing_of_redis(rt: Any, store: TemplateStore) -> None:
    store.put(ALICE, "shipped", sms("one"))
    template = store.get(ALICE, "shipped")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    unreachable = TemplateStore(redis.Redis(port=port, decode_responses=True), rt.keys)
    assert unreachable.cached(ALICE, "shipped", 1) is template
    assert TemplateStore(rt.redis, Keys("other:")).cached(ALICE, "shipped", 1) is None


def test_get_never_serves_a_cached_version_whose_document_changed(store: TemplateStore) -> None:
    # given: this process holds version 1; another deletes the template and puts another
    # version 1 under the same name
    store.put(ALICE, "shipped", sms("old"))
    old = store.get(ALICE, "shipped")
    key = store.keys.template(ALICE, "shipped")
    store.redis.hset(key, "v1", json.dumps(sms("new")))
    # when
    new = store.get(ALICE, "shipped")
    # then
    assert new is not old and new.render("sms", "en", {}) == {"text": "new"}
    assert store.cached(ALICE, "shipped", 1) is new


def test_the_cache_drops_the_least_recently_used_by_count_and_by_size() -> None:
    cache: LruCache[tuple[str, str], str] = LruCache(entries=2, size_max=100)
    cache.put(("p", "a"), "A", 10)
    cache.put(("p", "b"), "B", 10)
    assert cache.get(("p", "a")) == "A"  # a is now the most recently used
    cache.put(("p", "c"), "C", 10)
    assert cache.get(("p", "b")) is None
    assert cache.get(("p", "a")) == "A" and cache.get(("p", "c")) == "C"
    cache.put(("p", "d"), "D", 95)  # 95 + 10: over the size, the least recently used goes
    assert [cache.get(("p", n)) for n in "acd"] == [None, None, "D"]
    cache.put(("p", "huge"), "H", 1000)  # larger than the limit alone: kept, alone
    assert len(cache) == 1 and cache.get(("p", "huge")) == "H"
    cache.put(("q", "x"), "X", 1)
    cache.drop_where(("p",))
    assert len(cache) == 1 and cache.get(("q", "x")) == "X"


# --- template files -----------------------------------------------------------------------------

TOML = """
default_locale = "en"
description = "an order left the warehouse"

[channels.sms.en]
text = "Order {{ order }} shipped"

[channels.sms.zh]
template = { aliyun = "SMS_1234" }
params = { order = "{{ order }}" }
"""


def test_json_and_toml_files_load_as_name_and_document(store: TemplateStore, tmp_path: Path) -> None:
    (tmp_path / "order_shipped.json").write_text(json.dumps(SHIPPED, ensure_ascii=False), encoding="utf-8")
    (tmp_path / "order.paid.TOML").write_text(TOML, encoding="utf-8")
    assert load_file(tmp_path / "order_shipped.json") == ("order_shipped", SHIPPED)
    name, doc = load_file(str(tmp_path / "order.paid.TOML"))
    assert name == "order.paid"
    assert doc["channels"]["sms"]["zh"] == {
        "template": {"aliyun": "SMS_1234"},
        "params": {"order": "{{ order }}"},
    }
    store.put(ALICE, name, doc)
    assert store.get(ALICE, name).render("sms", "zh", {"order": 7}) == {
        "text": '{"order":"7"}',
        "template": {"aliyun": "SMS_1234"},
    }


BAD_FILES: dict[str, tuple[str, bytes | None, str]] = {
    "another suffix": ("shipped.yaml", b"default_locale: en", "baddoc"),
    "no suffix": ("shipped", b"{}", "baddoc"),
    "a bad name": ("bad name.json", b"{}", "badname"),
    "a name starting with a dot": (".json", b"{}", "baddoc"),
    "a missing file": ("missing.json", None, "baddoc"),
    "not JSON": ("shipped.json", b"{default_locale: en}", "baddoc"),
    "JSON of a list": ("shipped.json", b"[1, 2]", "baddoc"),
    "JSON with NaN": ("shipped.json", b'{"a": NaN}', "baddoc"),
    "not UTF-8 JSON": ("shipped.json", b'{"a": "\xff"}', "baddoc"),
    "not TOML": ("shipped.toml", b"default_locale = ", "baddoc"),
    "not UTF-8 TOML": ("shipped.toml", b'a = "\xff"', "baddoc"),
    "too big": ("shipped.json", b" " * (FILE_MAX_BYTES + 1), "toobig"),
}


@pytest.mark.parametrize(("filename", "content", "code"), list(BAD_FILES.values()), ids=list(BAD_FILES))
def test_a_bad_template_file_is_refused(
    tmp_path: Path, filename: str, content: bytes | None, code: str
) -> None:
    path = tmp_path / filename
    if content is not None:
        path.write_bytes(content)
    assert code_of(lambda: load_file(path)) == f"{TMPL}.{code}"


def test_a_directory_is_not_a_template_file(tmp_path: Path) -> None:
    (tmp_path / "shipped.json").mkdir()
    assert code_of(lambda: load_file(tmp_path / "shipped.json")) == f"{TMPL}.baddoc"


def test_a_toml_file_with_what_json_cannot_hold_is_refused_when_put(
    store: TemplateStore, tmp_path: Path
) -> None:
    (tmp_path / "dated.toml").write_text(TOML + "\n[channels.chat.en]\ntext = 1979-05-27T07:32:00Z\n")
    name, doc = load_file(tmp_path / "dated.toml")
    assert code_of(lambda: store.put(ALICE, name, doc)) == f"{TMPL}.baddoc"
    assert stored_keys(store) == []


def test_values_printed_in_an_email_html_body_are_escaped_and_the_text_is_not(store: TemplateStore) -> None:
    doc = {
        "default_locale": "en",
        "channels": {
            "email": {
                "en": {
                    "subject": "Hi {{ name }}",
                    "text": "Hi {{ name }}",
                    "html": "<p>Hi {{ name }}</p>{{ banner | safe }}",
                }
            }
        },
    }
    store.put(ALICE, "hello", doc)
    fields = store.get(ALICE, "hello").render("email", "en", {"name": "<script>x</script>", "banner": "<hr>"})
    assert fields["html"] == "<p>Hi &lt;script&gt;x&lt;/script&gt;</p><hr>"
    assert fields["text"] == fields["subject"] == "Hi <script>x</script>"
    # the escaping cannot be closed from inside the template
    broken = {
        **doc,
        "channels": {
            "email": {"en": {**doc["channels"]["email"]["en"], "html": "{% endautoescape %}{{ name }}"}}
        },
    }
    assert code_of(lambda: store.put(ALICE, "broken", broken)) == "e.cmd.noti.tmpl.badsyntax"
