"""The sending path: from a call to a vendor and back, above the providers and below Celery.

- :mod:`noti.send.runtime`: the composition root (settings, Redis clients, store, delayed
  set, providers, delivery book) shared by everything in a process.
- :mod:`noti.send.notifier`: adding, reading, removing and sending records, with the
  permission rules of :mod:`noti.access.users`; :mod:`noti.send.bulk`: ``notify_many``.
- :mod:`noti.send.sender`: one record's delivery (claim, provider, outcome);
  :mod:`noti.send.loop`: the asyncio loop where provider calls wait on the network;
  :mod:`noti.send.handlers`: the application's hooks around each delivery.
- :mod:`noti.send.intake`, :mod:`noti.send.poll`, :mod:`noti.send.callbacks`: receipts pushed
  and polled into the delivery book, and the status callbacks it queues.
- :mod:`noti.send.redrive`: dead letters put back; :mod:`noti.send.upkeep`: the maintenance
  beat runs; :mod:`noti.send.suppressions`: who may read and lift the suppression list.

Nothing here imports the Celery layer (``tests/test_layers.py``): the Celery tasks call in.
"""
