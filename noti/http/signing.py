"""``/v1/signing-keys``: the token user's webhook signing secrets (:mod:`noti.access.signing`).

A token acts for its user alone here: it makes, lists and deletes that user's secrets, never
another's (no route takes a user), and another user's key id answers exactly as a missing
one (404 ``e.noti.sigkey.not_found``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import APIRouter
from pydantic import BaseModel

from noti.http.guard import CallerDep
from noti.http.models import ErrorOut

if TYPE_CHECKING:
    from noti.access.signing import SigningKeys

__all__ = ["signing_routes"]

_ERRORS: dict[int | str, dict[str, object]] = {
    401: {"model": ErrorOut, "description": "No API token, or an unknown, expired or revoked one"},
    429: {"model": ErrorOut, "description": "The token is over its rate limit (see Retry-After)"},
    503: {"model": ErrorOut, "description": "Redis did not answer; try again"},
}


class SigningKeyOut(BaseModel):
    """One signing secret as listed: never the secret."""

    id: str
    user: str
    created_ms: int


class NewSigningKeyOut(SigningKeyOut):
    """A secret just made: shown this once."""

    secret: str


class SigningKeysOut(BaseModel):
    signing_keys: list[SigningKeyOut]


def signing_routes(keys: SigningKeys) -> APIRouter:
    """The routes over ``keys``."""
    router = APIRouter(prefix="/v1/signing-keys", tags=["signing keys"])

    @router.post(
        "",
        status_code=201,
        response_model=NewSigningKeyOut,
        responses={**_ERRORS, 422: {"model": ErrorOut, "description": "The user has 3 keys already"}},
        summary="Make a signing secret for the token's user (shown once; at most 3)",
    )
    def add_key(who: CallerDep) -> NewSigningKeyOut:
        secret, key = keys.add(who.user, acting=who.user)
        return NewSigningKeyOut(secret=secret, **key.to_json())

    @router.get(
        "",
        response_model=SigningKeysOut,
        responses=_ERRORS,
        summary="The token user's signing secrets (ids only), newest first",
    )
    def list_keys(who: CallerDep) -> SigningKeysOut:
        found = keys.entries(who.user, acting=who.user)
        return SigningKeysOut(signing_keys=[SigningKeyOut(**key.to_json()) for key in found])

    @router.delete(
        "/{key_id}",
        response_model=SigningKeyOut,
        responses={**_ERRORS, 404: {"model": ErrorOut, "description": "The user has no such key"}},
        summary="Delete one of the token user's signing secrets: it signs nothing from now on",
    )
    def delete_key(key_id: str, who: CallerDep) -> SigningKeyOut:
        return SigningKeyOut(**keys.delete(key_id, who.user, acting=who.user).to_json())

    return router
