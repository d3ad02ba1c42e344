"""``POST /v1/session``: the live page trades the token it was opened with for a short-lived page token.

The link ``hearth up`` prints carries a link token (15 minutes, good for nothing else); the page sends it
here once, gets a page token (15 minutes: ``page_token_lifetime_s``), takes the token out of the address
bar and renews the page token here (with the page token itself) while it stays open. So no long-lived
token needs to sit in a URL, a browser history or a server log.

- A link token is single-use: the first exchange marks its id in Redis (``SET NX`` until it expires,
  shared by every query-API process); a second one is a 401.
- A page token names its session (``sid``): the link token's id, or the id of the home or admin token it
  was made from. Revoking that id ends the page and every renewal of it; revoking the page token's own id
  ends that one.
- A page session ends, renewals included, when the api token it was made from expires, or 30 days
  (``PAGE_SESSION_MAX``) after its link was used; each renewal is another 15 minutes up to that end.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field
from redis.asyncio import Redis

from hearth_shared.schema.auth import PAGE_SESSION_MAX, Principal, issue
from hearth_shared.web.http import authenticate, token_from, unauthorized

router = APIRouter(prefix="/v1")

LINK_USED_KEY = "session-link:{}"  # a link token's id once it bought a session


class PageSession(BaseModel):
    token: str = Field(description="The page token: send it as 'Authorization: Bearer <token>'")
    token_id: str
    home_id: str | None = Field(description="The home it sees; null for an admin token")
    expires_at: datetime
    renew_after_s: float = Field(description="When the page should renew it (POST /v1/session again)")


@router.post(
    "/session",
    summary="Trade a page link's token (or a home, admin or page token) for a short-lived page token",
    description="Send the token as 'Authorization: Bearer <token>'. A link token works once; a page token "
    "renews itself (another 15 minutes); an api token gives a page token that never outlives it.",
    responses={401: {"description": "No token, a bad, expired or revoked one, or a link already used"}},
)
async def open_session(request: Request) -> PageSession:
    state = request.app.state
    token = token_from(request.headers.get("authorization"))
    principal = authenticate(state.token_secret, token, state.revocations, kinds={"api", "page", "link"})
    now = time.time()
    if principal.kind == "link":
        await _use_link_once(state.redis, principal, now)
    try:
        page_token, claims = issue(
            state.token_secret,
            home_id=principal.home_id,
            admin=principal.admin,
            expires_in=timedelta(seconds=state.settings.page_token_lifetime_s),
            kind="page",
            session_id=principal.session_id or principal.token_id,
            session_end=_session_end(principal, now),
            now=now,
        )
    except ValueError as exc:  # the session ends within this second
        raise unauthorized(f"invalid token: {exc}") from exc
    assert claims.exp is not None  # page tokens always expire
    return PageSession(
        token=page_token,
        token_id=claims.jti,
        home_id=claims.home,
        expires_at=datetime.fromtimestamp(claims.exp, UTC),
        renew_after_s=max(1.0, (claims.exp - now) * 2 / 3),
    )


def _session_end(principal: Principal, now: float) -> float | None:
    """When the page session this token opens or renews ends (None: never, for a never-expiring admin)."""
    if principal.kind == "link":
        return now + PAGE_SESSION_MAX.total_seconds()
    if principal.kind == "page":
        return principal.session_end
    return principal.expires_at


async def _use_link_once(redis: Redis, principal: Principal, now: float) -> None:
    assert principal.token_id is not None and principal.expires_at is not None  # links always have both
    ttl_ms = max(1, int((principal.expires_at - now) * 1000))
    first = await redis.set(LINK_USED_KEY.format(principal.token_id), b"1", nx=True, px=ttl_ms)
    if not first:
        raise unauthorized(
            "invalid token: this page link was already used; make another with "
            "`hearth token create --home H --link`"
        )
