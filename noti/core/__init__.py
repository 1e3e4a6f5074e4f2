"""noti's core: what a notification is and how it is kept, with no Celery in it.

- :mod:`~noti.core.record`: the record (:class:`~noti.core.record.Notification`), its
  channels, statuses, ids and validation;
- :mod:`~noti.core.keys`: the Redis key layout, written down in one place;
- :mod:`~noti.core.store`: records and their indexes in Redis (the Lua scripts of
  ``noti/lua``), read through :mod:`~noti.core.reads`, created through
  :mod:`~noti.core.creating`;
- :mod:`~noti.core.attempt`: what a claim, an attempt's outcome and a revoke carry;
- :mod:`~noti.core.lease`: how long a sender holds a record;
- :mod:`~noti.core.retry`: retry policies and outcomes;
- :mod:`~noti.core.delay`: delayed and debounced records;
- :mod:`~noti.core.deadletter`: the dead-letter stream's entries.

The Celery layer (app, transport, queues, publishing, tasks, beat, result backend, events
emission) is :mod:`noti.celery`; the modules here never import it.
"""
