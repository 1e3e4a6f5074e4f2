"""``make chaos``: noti end to end under faults, reconciled id by id.

One run (``python -m chaos``; two by default, Redis with ``appendfsync everysec`` then
``always``) sends 10,000 notifications — SMS, e-mail and webhooks, levels 1-1000, a third
delayed 1-20 s, some with idempotency keys (half of them called twice), some debounced with a
reused identifier — from this process through four real ``celery -A noti worker`` processes
and ``celery -A noti beat`` to fake providers on loopback that fail about 10 % of the attempts
(temporarily and for good) and answer 1 % past the lease. Meanwhile it SIGKILLs a random
worker every 2-6 s (and starts it again) and kills Redis twice (restarted from its AOF,
cut back to what the fsync policy guarantees: see :mod:`chaos.cluster`). A flood window
measures how long a user's level-100 SMS wait while another user sends level-1 SMS at ten
times the normal rate into an SMS account limited to 100 requests a second.

Then it reconciles every id a ``notify()`` call returned against what the providers received
(:mod:`chaos.reconcile`), prints one table (:mod:`chaos.report`), writes a JSON report and
exits 1 if anything is lost or stuck without a fault that explains it, any duplicate send has
no such cause, or a process crashed.

Modules: :mod:`chaos.plan` (what happens, from a seed), :mod:`chaos.providers` (the fakes and
the ledger of attempts), :mod:`chaos.cluster` (Redis, workers, beat, the faults),
:mod:`chaos.producer` (the application's calls), :mod:`chaos.run` (one run's timeline),
:mod:`chaos.facts` (what it observed, indexed), :mod:`chaos.reconcile` (the verdicts) and
:mod:`chaos.causes` (why something was sent twice).
``tests/test_chaos.py`` runs the short form (1,000 notifications, 2 worker kills, 1 Redis
restart) in the suite.
"""
