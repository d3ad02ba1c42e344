"""What both HTTP APIs share: bearer-token authentication as a FastAPI dependency, and health.

Every API keeps ``app.state.token_secret`` and ``app.state.revocations`` (a ``Revocations`` set its
``RevocationFeed`` fills); a token that is malformed, badly signed, expired, revoked or of a kind the
APIs do not take (a page link) is a 401 that says which.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status

from hearth_shared.schema.auth import API_KINDS, InvalidToken, Principal, Revocations, verify_token


def token_from(request_or_header: str | None, query_token: str | None = None) -> str | None:
    if request_or_header:
        scheme, _, token = request_or_header.partition(" ")
        if scheme.lower() == "bearer" and token:
            return token.strip()
    return query_token


def unauthorized(message: str) -> HTTPException:
    return HTTPException(status.HTTP_401_UNAUTHORIZED, message, headers={"WWW-Authenticate": "Bearer"})


def authenticate(
    secret: str,
    token: str | None,
    revocations: Revocations | None = None,
    *,
    now: float | None = None,
    kinds: Iterable[str] = API_KINDS,
) -> Principal:
    """The principal a token names; raises 401 with a message that says what is wrong.

    ``revocations`` is None only where no revocation can exist (unit tests of one route)."""
    if not token:
        raise unauthorized("missing bearer token: send 'Authorization: Bearer <token>'")
    try:
        principal = verify_token(secret, token, now=now, kinds=kinds)
    except InvalidToken as exc:
        raise unauthorized(f"invalid token: {exc}") from exc
    if revocations is not None and any(i in revocations for i in principal.token_ids()):
        raise unauthorized("invalid token: token revoked")
    return principal


async def current_principal(request: Request) -> Principal:  # async: no thread-pool hop per request
    state = request.app.state
    return authenticate(
        state.token_secret, token_from(request.headers.get("authorization")), state.revocations
    )


CurrentPrincipal = Annotated[Principal, Depends(current_principal)]


def require_admin(principal: Principal, what: str) -> None:
    """403 for a home token, saying what only an admin token may do."""
    if not principal.admin:
        message = f"only an admin token may {what}; this is a home token"
        raise HTTPException(status.HTTP_403_FORBIDDEN, message)


def not_found(what: str) -> HTTPException:
    return HTTPException(status.HTTP_404_NOT_FOUND, f"{what} not found")
