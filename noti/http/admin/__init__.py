"""The admin page of ``noti serve`` (``/admin``): server-rendered HTML over the same Python
API and the same API tokens as the HTTP API, readable without JavaScript.

==========================  ============================================================
page                        shows
==========================  ============================================================
``/admin/login``            the login form: paste an API token (``noti token add``)
``/admin/``                 live counters: records by status, deliveries, queues,
                            delayed set, dead letters, workers (refreshed by admin.js)
``/admin/notifications``    the search (an address, a recipient, status, channel, provider,
                            vendor id, times) or the listing; each links to its page
``/admin/notifications/ID`` one record: its fields, its timeline, its dead letter (retry)
``/admin/dead``             dead letters (retry one, purge all): root members
``/admin/held``             records waiting for a time (quiet hours, delays, back-offs)
                            and open digest windows
``/admin/suppressions``     the suppression list (lift one: root members)
``/admin/tokens``           API tokens (revoke one): root administrators; others see
                            their own
==========================  ============================================================

The session and the forms' guards are :mod:`noti.http.admin.session`'s; the pages are
:mod:`~noti.http.admin.pages`, the forms :mod:`~noti.http.admin.actions`, what they share
:mod:`~noti.http.admin.site`, the app, its headers and error pages :mod:`~noti.http.admin.app`,
the templates' environment :mod:`~noti.http.admin.render`.
"""

from __future__ import annotations

from noti.http.admin.app import build_site
from noti.http.admin.site import Site

__all__ = ["Site", "build_site"]
