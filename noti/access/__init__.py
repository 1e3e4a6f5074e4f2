"""Who may do what, and with which keys: the access layer.

- :mod:`noti.access.signing`: each user's webhook signing secrets (``whsec_…``), which sign the
  webhooks and status callbacks that user's notifications post to URLs the operator did not
  configure (an operator's provider secret never signs a user-chosen URL).
- :mod:`noti.access.grants`: which providers a user (and an API token) may name, and which
  ones that reach private addresses they may use at all.
- :mod:`noti.access.users`: roles and level caps; :mod:`noti.access.tokens`: API tokens
  (hashed, bound to a user, cap, rate, expiry, providers).
- :mod:`noti.access.redact`: credentials kept out of every log line a process writes.

It stands on the core's ground (settings, keys, errors, inputs, Redis); the providers, the
notifier and the HTTP API use it.
"""
