"""SSRF: a webhook or status callback to a target on this machine or a private network is
refused when it is added (``e.cmd.noti.add.badtarget``, nothing stored), in every spelling of
the address: loopback, private, link-local (the cloud metadata address), unspecified,
carrier-grade NAT, IPv6 and IPv4-mapped IPv6, decimal, octal, hexadecimal and short IPv4
forms, ``localhost`` and its subdomains, and userinfo that puts a harmless-looking name before
the real host.

Three ways in, each refused by the webhook provider's guard: the webhook channel's default
provider (``hookspub``), a provider named in the body (``hooks``, which carries a secret
header), and the ``status_callback`` of any notification (checked by the webhook channel's
provider). A provider an operator set ``allow_private`` on (``hooksinternal``) is point 2's
(who may name it), not this file's.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.hostile_http.conftest import PHONE, Deployment
from tests.hostile_http.harness import assert_refused

BAD_TARGET = "e.cmd.noti.add.badtarget"

#: (id, URL)
TARGETS: list[Any] = [
    ("loopback", "http://127.0.0.1/hook"),
    ("loopback-port", "http://127.0.0.1:6379/"),
    ("loopback-https", "https://127.0.0.1:8700/v1/notifications"),
    ("loopback-other", "http://127.8.9.10/"),
    pytest.param("http://127.0.0.1./", id="loopback-trailing-dot"),
    pytest.param("http://10.0.0.1./", id="private-trailing-dot"),
    ("short-form", "http://127.1/"),
    ("decimal", "http://2130706433/"),
    ("octal", "http://0177.0.0.1/"),
    ("octal-whole", "http://017700000001/"),
    ("hex", "http://0x7f000001/"),
    ("hex-dotted", "http://0x7f.0x0.0x0.0x1/"),
    ("unspecified", "http://0.0.0.0/"),
    ("zero", "http://0/"),
    ("private-10", "http://10.0.0.1/"),
    ("private-172", "http://172.16.0.1/"),
    ("private-192", "http://192.168.1.1/"),
    ("cgnat", "http://100.64.0.1/"),
    ("benchmark-net", "http://198.18.0.1/"),
    ("metadata", "http://169.254.169.254/latest/meta-data/"),
    ("metadata-decimal", "http://2852039166/latest/meta-data/"),
    ("broadcast", "http://255.255.255.255/"),
    ("multicast", "http://224.0.0.1/"),
    ("ipv6-loopback", "http://[::1]/"),
    ("ipv6-unspecified", "http://[::]/"),
    ("ipv6-mapped-loopback", "http://[::ffff:127.0.0.1]/"),
    ("ipv6-mapped-hex", "http://[::ffff:7f00:1]/"),
    ("ipv6-mapped-metadata", "http://[::ffff:169.254.169.254]/"),
    ("ipv6-mapped-private", "http://[::ffff:10.0.0.1]/"),
    ("ipv6-6to4-loopback", "http://[2002:7f00:1::]/"),
    ("ipv6-link-local", "http://[fe80::1]/"),
    ("ipv6-unique-local", "http://[fc00::1]/"),
    ("ipv6-site-local", "http://[fec0::1]/"),
    ("ipv6-documentation", "http://[2001:db8::1]/"),
    ("localhost", "http://localhost/"),
    ("localhost-port", "http://localhost:8700/"),
    ("localhost-upper", "http://LOCALHOST/"),
    ("localhost-dot", "http://localhost./"),
    ("localhost-subdomain", "http://api.localhost/"),
    ("userinfo-then-loopback", "http://hooks.example.com@127.0.0.1/"),
    ("userinfo-password-then-loopback", "http://user:pass@127.0.0.1:8700/"),
    ("userinfo-then-localhost", "https://example.com:443@localhost/"),
    ("userinfo-then-metadata", "http://example.com@169.254.169.254/"),
]

#: Each waits an hour if it is stored after all: a case that fails leaves no send behind it
#: to change the database under the cases that follow.
WEBHOOK: dict[str, Any] = {"type": "webhook", "content": {"event": "paid"}, "delay": 3600}
#: (id, the notification for a target URL, who sends it: carol may name ``hooks``)
WAYS = [
    ("default-provider", lambda url: {**WEBHOOK, "to": url}, "alice"),
    ("named-provider", lambda url: {**WEBHOOK, "to": url, "provider": "hooks"}, "carol"),
    (
        "status-callback",
        lambda url: {"type": "sms", "to": PHONE, "text": "x", "delay": 3600, "status_callback": url},
        "alice",
    ),
]


@pytest.mark.parametrize("url", [t if hasattr(t, "marks") else pytest.param(t[1], id=t[0]) for t in TARGETS])
@pytest.mark.parametrize(("way", "who"), [w[1:] for w in WAYS], ids=[w[0] for w in WAYS])
def test_a_webhook_to_a_non_public_address_is_refused(
    deployment: Deployment, client: httpx.Client, way: Any, who: str, url: str
) -> None:
    with deployment.unchanged():
        answer = deployment.ask(client, "POST", "/v1/notifications", json=way(url), who=who)
    assert_refused(answer, 422, BAD_TARGET)
