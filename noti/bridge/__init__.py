"""Bridges between noti and other queue systems' Redis layouts.

:mod:`noti.bridge.webman` reads and writes the layout of the PHP plugin
``solarseahorse/webman-redis-queue``.
"""
