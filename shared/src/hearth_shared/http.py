"""What both HTTP APIs share: bearer-token authentication as a FastAPI dependency, and health."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request, status

from hearth_shared.auth import InvalidToken, Principal, verify_token


def token_from(request_or_header: str | None, query_token: str | None = None) -> str | None:
    if request_or_header:
        scheme, _, token = request_or_header.partition(" ")
        if scheme.lower() == "bearer" and token:
            return token.strip()
    return query_token


def authenticate(secret: str, token: str | None) -> Principal:
    """The principal a token names; raises 401 with a message that says what is wrong."""
    if not token:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "missing bearer token: send 'Authorization: Bearer <token>'",
            headers={"WWW-Authenticate": "Bearer"},
        )
    try:
        return verify_token(secret, token)
    except InvalidToken as exc:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED, f"invalid token: {exc}", headers={"WWW-Authenticate": "Bearer"}
        ) from exc


async def current_principal(request: Request) -> Principal:  # async: no thread-pool hop per request
    secret: str = request.app.state.token_secret
    return authenticate(secret, token_from(request.headers.get("authorization")))


CurrentPrincipal = Annotated[Principal, Depends(current_principal)]


def not_found(what: str) -> HTTPException:
    return HTTPException(status.HTTP_404_NOT_FOUND, f"{what} not found")
