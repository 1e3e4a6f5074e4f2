"""Redis plumbing, at the ground with the settings and the errors: nothing of noti's own
above it is imported here.

- :mod:`noti.redis.conn`: connections (URLs, Sentinel, pools), the one place where redis-py's
  errors become noti's, loading the Lua scripts of ``noti/lua/``, and pipelines of script calls.
- :mod:`noti.redis.counters`: the cluster-wide counters the scripts keep (``noti:metrics``).
- :mod:`noti.redis.entropy`: random hex digits for message ids, a block of ``os.urandom`` at
  a time.

The package is named after the server, not the client: ``import redis`` inside it still
imports redis-py (absolute imports).
"""
