"""API tokens: HMAC-signed, stateless, so every service checks them with the shared secret alone.

A token names one home (``home:<id>``) or is an admin token (``admin``). Format:
``hth_<base64url(scope)>.<base64url(hmac_sha256(secret, scope + nonce))>.<nonce>``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass


class InvalidToken(ValueError):
    pass


@dataclass(frozen=True)
class Principal:
    home_id: str | None  # None for admin tokens
    admin: bool = False

    def may_see(self, home_id: str) -> bool:
        return self.admin or self.home_id == home_id


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _sign(secret: str, scope: str, nonce: str) -> str:
    return _b64(hmac.new(secret.encode(), f"{scope}|{nonce}".encode(), hashlib.sha256).digest()[:24])


def create_token(secret: str, *, home_id: str | None = None, admin: bool = False) -> str:
    if not secret:
        raise ValueError("no token secret configured")
    if admin == (home_id is not None):
        raise ValueError("a token is either for one home or an admin token")
    scope = "admin" if admin else f"home:{home_id}"
    nonce = secrets.token_hex(6)
    return f"hth_{_b64(scope.encode())}.{_sign(secret, scope, nonce)}.{nonce}"


def verify_token(secret: str, token: str) -> Principal:
    try:
        head, signature, nonce = token.split(".")
        if not head.startswith("hth_"):
            raise InvalidToken("not a Hearth token")
        scope = _unb64(head[4:]).decode()
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidToken("malformed token") from exc
    if not secret or not hmac.compare_digest(signature, _sign(secret, scope, nonce)):
        raise InvalidToken("bad token signature")
    if scope == "admin":
        return Principal(home_id=None, admin=True)
    if scope.startswith("home:") and len(scope) > 5:
        return Principal(home_id=scope[5:])
    raise InvalidToken("unknown token scope")
