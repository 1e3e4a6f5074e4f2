"""What the admin page's routes share (:class:`Site`): the Python API objects they call, over one
notifier, and the rendering of a page for the signed-in user or of the login form.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fastapi import Request
from fastapi.responses import HTMLResponse

from noti.access.tokens import Caller, TokenStore
from noti.access.users import Role, resolve_user
from noti.http.admin.render import Pages, base_path
from noti.http.admin.session import csrf_of, forget, local_path
from noti.http.guard import SESSION_COOKIE
from noti.sending.redrive import Redrive
from noti.sending.suppressions import Suppressions

if TYPE_CHECKING:
    from noti.observe.snapshot import Snapshot
    from noti.recipients.api import Recipients
    from noti.sending.notifier import Notifier

__all__ = ["ROLES", "Site"]

ROLES = {Role.USER: "user", Role.ROOT_MEMBER: "root member", Role.ROOT_ADMIN: "root administrator"}


@dataclass
class Site:
    """What the admin page's routes read and change, over one notifier."""

    notifier: Notifier
    people: Recipients
    snapshot: Callable[[], Snapshot]
    pages: Pages = field(default_factory=Pages)

    def __post_init__(self) -> None:
        runtime = self.notifier.runtime
        self.tokens: TokenStore = runtime.tokens
        self.redrive = Redrive(runtime, self.notifier.publisher)
        self.suppressions = Suppressions(runtime)

    def role(self, who: Caller) -> Role:
        """The role the settings give the token's user (a token carries no role of its own)."""
        return resolve_user(self.notifier.runtime.settings, who.user).role

    def page(
        self, request: Request, who: Caller, template: str, *, status_code: int = 200, **context: Any
    ) -> HTMLResponse:
        """``template`` for the signed-in ``who``: their role and the forms' CSRF token."""
        role = self.role(who)
        return self.pages.render(
            request,
            template,
            who=who,
            role=ROLES[role],
            is_root=role >= Role.ROOT_MEMBER,
            is_admin=role is Role.ROOT_ADMIN,
            csrf=csrf_of(request.cookies.get(SESSION_COOKIE, "")),
            status_code=status_code,
            **context,
        )

    def login_page(self, request: Request, *, message: str = "", status_code: int = 200) -> HTMLResponse:
        """The login form, saying ``message`` (why the session was refused), sending the
        browser back to the page it asked for; a refused session's cookie is cleared."""
        base = base_path(request)
        here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        after = local_path(here, base=base) if request.method == "GET" else None
        if after is None or after.startswith(f"{base}/login"):
            after = f"{base}/"
        response = self.pages.render(
            request, "login.html", message=message, after=after, status_code=status_code
        )
        if message and SESSION_COOKIE in request.cookies:
            forget(response, request, path=base or "/")
        return response
