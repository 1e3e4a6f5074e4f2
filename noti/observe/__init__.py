"""Observing a running noti: one read model of the whole cluster, rendered two ways.

- :mod:`noti.observe.snapshot`: :class:`~noti.observe.snapshot.Snapshot`, the cluster's state
  read from Redis in two pipelined round trips (counters, records by status, queues per
  priority step, delayed set and pump lag, dead letters, events, number pools, workers);
- :mod:`noti.observe.prometheus`: the Prometheus collector and server over it
  (``noti metrics``; the worker's exporter with ``NOTI_METRICS_PORT``);
- ``noti status`` (:mod:`noti.cli.status`): the same snapshot as one screen or JSON;
- :mod:`noti.observe.presence`: the worker heartbeats that tell which workers are alive.

The counters themselves are written by the Lua scripts (:mod:`noti.redis.counters`); nothing here
counts anything in a process.
"""
