"""The sending path: from a call to a vendor and back, above the providers and below Celery.

- :mod:`noti.sending.runtime`: the composition root (settings, Redis clients, store, delayed
  set, providers, delivery book) shared by everything in a process.
- :mod:`noti.sending.notifier`: adding, reading, removing and sending records, with the
  permission rules of :mod:`noti.access.users`; :mod:`noti.sending.bulk`: ``notify_many``.
- :mod:`noti.sending.sender`: one record's delivery (claim, provider, outcome);
  :mod:`noti.sending.loop`: the asyncio loop where provider calls wait on the network;
  :mod:`noti.sending.handlers`: the application's hooks around each delivery.
- :mod:`noti.sending.intake`, :mod:`noti.sending.poll`, :mod:`noti.sending.callbacks`: receipts pushed
  and polled into the delivery book, and the status callbacks it queues.
- :mod:`noti.sending.redrive`: dead letters put back; :mod:`noti.sending.upkeep`: the maintenance
  beat runs; :mod:`noti.sending.suppressions`: who may read and lift the suppression list.

Nothing here imports the Celery layer (``tests/test_layers.py``): the Celery tasks call in.
"""
