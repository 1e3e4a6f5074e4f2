"""The admin page's forms that change something (``POST``), each over the Python API with the
signed-in user's rights, each refused unless it carries the session's CSRF token and comes from
the page's own origin (:mod:`noti.http.admin.session`). After the change the browser is sent
(303) to the page that shows it.

=====================================  ==================================================
form                                   does (who may)
=====================================  ==================================================
``POST /admin/dead/{id}/retry``        a dead letter's record back to waiting, queued
                                       (root members; then the record's page)
``POST /admin/dead/purge``             every dead letter removed; ``confirm=yes``
                                       (root members)
``POST /admin/suppressions/lift``      ``channel`` + ``target`` receive again (root members)
``POST /admin/tokens/{id}/revoke``     an API token authenticates nothing more (root
                                       administrators)
``POST /admin/logout``                 the session cookie cleared (anyone)
=====================================  ==================================================
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Path, Request
from fastapi.responses import RedirectResponse

from noti.errors import InvalidInput
from noti.http.admin.render import base_path
from noti.http.admin.session import FormDep
from noti.http.admin.site import Site

__all__ = ["action_routes"]

Ident = Annotated[str, Path(min_length=1, max_length=64)]


def action_routes(site: Site) -> APIRouter:
    """The forms over ``site``."""
    router = APIRouter()

    def done(request: Request, where: str) -> RedirectResponse:
        return RedirectResponse(f"{base_path(request)}{where}", status_code=303)

    @router.post("/dead/{ident}/retry")
    def retry(request: Request, ident: Ident, form: FormDep) -> RedirectResponse:
        record = site.redrive.retry(ident, user=form.who.user)
        return done(request, f"/notifications/{quote(record.id, safe='')}?retried=1")

    @router.post("/dead/purge")
    def purge(request: Request, form: FormDep) -> RedirectResponse:
        if form.get("confirm") != "yes":
            raise InvalidInput(
                "tick the box to confirm that every dead letter is to be removed",
                code="e.noti.admin.badform",
            )
        removed = site.redrive.purge(user=form.who.user)
        return done(request, f"/dead?purged={removed}")

    @router.post("/suppressions/lift")
    def lift(request: Request, form: FormDep) -> RedirectResponse:
        site.suppressions.lift(form.get("channel"), form.get("target"), user=form.who.user)
        return done(request, "/suppressions?lifted=1")

    @router.post("/tokens/{ident}/revoke")
    def revoke(request: Request, ident: Ident, form: FormDep) -> RedirectResponse:
        info = site.tokens.revoke(ident, acting=form.who.user)
        return done(request, f"/tokens?revoked={info.id}")

    return router
