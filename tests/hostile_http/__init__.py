"""The hostile-HTTP suite (issue 32, "Safe among many users"): the HTTP API tried as an
attacker holding an ordinary user's token would try it, against a real ``noti serve`` (its
access log on), a real ``celery -A noti worker`` and the vendors' fakes (``tests/fakes``).

Every case asserts three things:

1. the refusal's status and stable code, in noti's error body
   (``assert_refused(answer, status, code)``, :mod:`tests.hostile_http.harness`);
2. that nothing changed where nothing may: ``with deployment.unchanged(): answer = …``
   compares a digest of every Redis key before and after (which keys and fields may change
   on a refused request, and why, is in :mod:`tests.hostile_http.harness`);
3. that no secret shows: each answer is checked as it arrives, and when the package ends,
   every answer again and every log the run wrote (server and worker). One secret anywhere
   fails the run.

The deployment (``conftest.py``) is started once for the package: users ``alice`` and
``bob`` (plain), ``ops`` (root member), ``boss`` (root administrator), a token each
(``deployment.tokens``: also ``alice2``, her second, ``revoked``, ``expired``, and
``alice_vendor``/``boss_vendor``, narrowed to ``vendor``); providers ``hookspub``
(the webhook channel's default), ``hooks`` (secret ``X-Internal-Key`` header),
``hooksinternal`` (``allow_private``), ``vendor`` (a sandbox taking signed receipts), ``ali``
and ``tw`` (Aliyun and Twilio fakes, receipts on); seeded ids in ``deployment.ids``
(``alice_record``, ``bob_record`` waiting an hour, ``alice_event``, ``bob_event``,
``tw_record`` delivered by Twilio's signed callback); the configured secrets in
``deployment.secrets``, and the ones cases sign with in ``deployment.keys``.

Adding a point's cases
----------------------

One file per point of the issue's "What to build", named ``test_p<N>_<word>.py``
(``test_p1_secrets.py``, ``test_p2_grants.py``, ``test_p3_receipts.py``, ``test_p4_logs.py``,
``test_p5_bounds.py``, ``test_p6_not_found.py``, ``test_p7_listeners.py``,
``test_p8_smaller.py``). A file is a table and a test:

.. code-block:: python

    CASES = [  # (id, method, path, who, body, status, code)
        ("bob-names-hooks", "POST", "/v1/notifications", "bob", {...}, 403, "e.noti.access.provider"),
    ]

    @pytest.mark.parametrize(("method", "path", "who", "body", "status", "code"),
                             [c[1:] for c in CASES], ids=[c[0] for c in CASES])
    def test_...(deployment, client, method, path, who, body, status, code):
        with deployment.unchanged():
            answer = deployment.ask(client, method, path, who=who, json=body)
        assert_refused(answer, status, code)

``deployment.ask`` fills ``{alice_record}`` and the like into the path and sends ``who``'s
token (``who=None``: none). Use the package's ``client`` fixture (or ``deployment.client()``)
so that every answer is scanned. A case written before its fix is marked
``pytest.mark.xfail(strict=True, reason="issue 32 point N: in progress")``: it fails the run
the moment the fix lands, and the mark comes off. A case that might store something if the
server got it wrong should make it wait (``"delay": 3600``), so a failure leaves no send behind
it to move the database under later cases.

What a point needs of the deployment (another provider, user, setting or seed) goes into
``conftest.py``; a new secret is made fresh with ``secrets.add(name, value)`` so the leak scan
looks for it. A fix that makes refusals write something on purpose (a counter of refused
receipts, say) adds exactly that key or field to the digest's exclusions in ``harness.py``,
with its reason.

Every case here is marked ``integration`` and ``bounds`` by ``conftest.py`` (``make test``
runs those on the lowest supported versions too). The package runs one server and one worker;
keep cases to plain HTTP calls, without sleeps.
"""
