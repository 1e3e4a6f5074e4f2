"""``/v1/suppressions``: the suppression list over HTTP, under :mod:`noti.sending.suppressions`' rules.

* ``GET /v1/suppressions[?channel=&limit=]``: the entries the token's user may see (root:
  all; others: those a record of theirs caused), newest first.
* ``DELETE /v1/suppressions/{channel}/{target}``: lift one (root members only: 403
  ``e.cmd.noti.suppress.nopvg`` for anyone else, asked before anything is looked up; 404
  ``e.cmd.noti.suppress.not_found`` when it is not suppressed). A webhook target is a URL: the
  route takes the rest of the path as the target, percent-encoded or not.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel

from noti.core.suppression import Suppressed
from noti.http.guard import CallerDep
from noti.http.models import ErrorOut
from noti.sending.runtime import Runtime
from noti.sending.suppressions import Suppressions

__all__ = ["suppression_routes"]

_ERRORS: dict[int | str, dict[str, object]] = {
    401: {"model": ErrorOut, "description": "No API token, or an unknown, expired or revoked one"},
    422: {"model": ErrorOut, "description": "An unknown channel, a bad target or limit"},
    429: {"model": ErrorOut, "description": "The token is over its rate limit (see Retry-After)"},
    503: {"model": ErrorOut, "description": "Redis did not answer; try again"},
}


class SuppressionOut(BaseModel):
    """One suppressed target and why (empty strings: not known)."""

    channel: str
    target: str
    #: optout, bounce, complaint, unsubscribe ("" for a suppression older than its why).
    reason: str
    code: str
    text: str
    record: str
    user: str
    provider: str
    at_ms: int


class SuppressionsOut(BaseModel):
    suppressions: list[SuppressionOut]


def suppression_routes(runtime: Runtime) -> APIRouter:
    """The routes over ``runtime``'s suppression list."""
    suppressions = Suppressions(runtime)
    router = APIRouter(prefix="/v1/suppressions", tags=["suppressions"])

    @router.get(
        "",
        response_model=SuppressionsOut,
        responses=_ERRORS,
        summary="Suppressed targets the token user may see (root: all; others: their own records')",
    )
    def list_suppressions(
        who: CallerDep,
        channel: Annotated[str | None, Query(max_length=64, description="Only this channel's")] = None,
        limit: Annotated[int, Query(ge=1, le=10_000, description="At most this many")] = 1000,
    ) -> SuppressionsOut:
        found = suppressions.entries(user=who.user, channel=channel, limit=limit)
        return SuppressionsOut(suppressions=[SuppressionOut(**asdict(e)) for e in found])

    @router.delete(
        "/{channel}/{target:path}",
        response_model=SuppressionOut,
        responses={
            **_ERRORS,
            403: {"model": ErrorOut, "description": "Only root members lift suppressions"},
            404: {"model": ErrorOut, "description": "The target is not suppressed"},
        },
        summary="Lift a suppression: the target receives the channel's notifications again (root only)",
    )
    def delete_suppression(channel: str, target: str, who: CallerDep) -> SuppressionOut:
        entry: Suppressed = suppressions.lift(channel, target, user=who.user)
        return SuppressionOut(**asdict(entry))

    return router
