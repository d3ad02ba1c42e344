"""API tokens: HMAC-signed claims with an id and an expiry, checked with the shared secret alone.

Format: ``hth1_<base64url(claims)>.<base64url(hmac_sha256(secret, "hth1." + base64url(claims)))>``.
The claims are compact JSON (``jti``, ``kind``, ``home`` or ``admin``, ``iat``, ``exp``; page tokens also
``sid`` and ``end``).
The signature covers the exact encoded bytes that are decoded afterwards, and JSON frames every field, so
no scope can be re-read as another (the first format signed ``scope|nonce`` unframed: a token for home
``B|x`` re-split into one for ``B``). The version sits in the prefix and in the signed bytes; tokens of the
first format (``hth_``) are refused.

Kinds: ``api`` (what ``hearth token create`` prints), ``page`` (the live page's short-lived token, used
like an api token and renewed while the page is open) and ``link`` (a short-lived, single-use token in the
link ``hearth up`` prints: it is good for nothing but one ``POST /v1/session``, which trades it for a page
token; a page token names its session as ``sid``, the id of the link or api token it was made from, so
revoking that id ends the page session; and the session's hard ``end``, which no renewal passes: the api
token's expiry, or ``PAGE_SESSION_MAX`` after the link was used).

Expiry: home tokens 90 days by default, admin tokens 30 days (an operator makes a new one monthly; only
admin tokens may be made to never expire, for provisioning), page and link tokens 15 minutes.

Stateless checks end at the expiry; revocation is state: a ``Revocations`` set of token ids, fed by the
compacted revocations topic (``hearth_shared.adapters.revocations``), checked on every request.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Literal

import msgspec

from hearth_shared.schema.ids import is_identifier

PREFIX = "hth1_"
Kind = Literal["api", "page", "link"]
API_KINDS: frozenset[str] = frozenset({"api", "page"})  # what the APIs take; a link only buys a session
NEVER: Literal["never"] = "never"
Expiry = timedelta | Literal["never"] | None  # None: the default for the token's kind

HOME_TOKEN_LIFETIME = timedelta(days=90)
ADMIN_TOKEN_LIFETIME = timedelta(days=30)
PAGE_TOKEN_LIFETIME = timedelta(minutes=15)
LINK_TOKEN_LIFETIME = timedelta(minutes=15)
PAGE_SESSION_MAX = timedelta(days=30)  # a page opened from a link renews its token up to this long
MAX_TOKEN_LENGTH = 1024  # an honest token is under 200 characters; do not HMAC megabytes


class InvalidToken(ValueError):
    pass


class TokenClaims(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True):
    """What a token says, exactly as signed. ``exp`` and ``iat`` are Unix seconds."""

    jti: str
    kind: Kind = "api"
    home: str | None = None
    admin: bool = False
    iat: int
    exp: int | None = None
    sid: str | None = None
    end: int | None = None


_encode_claims = msgspec.json.Encoder()
_decode_claims = msgspec.json.Decoder(TokenClaims)


@dataclass(frozen=True)
class Principal:
    home_id: str | None  # None for admin tokens
    admin: bool = False
    token_id: str | None = None
    expires_at: float | None = None  # Unix seconds; None: never
    session_id: str | None = None  # a page token's session: the link or api token it was made from
    session_end: float | None = None  # when a page token's session ends, renewals included
    kind: str = "api"

    def may_see(self, home_id: str) -> bool:
        return self.admin or self.home_id == home_id

    def token_ids(self) -> tuple[str, ...]:
        """The ids a revocation of this token may name: its own, and its page session's."""
        return tuple(i for i in (self.token_id, self.session_id) if i is not None)


@dataclass
class Revocations:
    """The token ids revoked so far (in memory; each API process follows the revocations topic)."""

    ids: set[str] = field(default_factory=set)

    def add(self, token_id: str) -> None:
        self.ids.add(token_id)

    def __contains__(self, token_id: object) -> bool:
        return token_id in self.ids

    def __len__(self) -> int:
        return len(self.ids)

    def why_ended(self, principal: Principal, now: float) -> str | None:
        """Why a token that was good when checked is no longer (revoked, expired), or None."""
        if any(i in self.ids for i in principal.token_ids()):
            return "token revoked"
        if principal.expires_at is not None and now >= principal.expires_at:
            return "token expired"
        return None


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _signature(secret: str, payload: str) -> str:
    return _b64(hmac.new(secret.encode(), f"{PREFIX[:-1]}.{payload}".encode(), hashlib.sha256).digest())


def new_token_id() -> str:
    return secrets.token_hex(12)


def default_lifetime(*, admin: bool, kind: Kind) -> timedelta:
    if kind == "page":
        return PAGE_TOKEN_LIFETIME
    if kind == "link":
        return LINK_TOKEN_LIFETIME
    return ADMIN_TOKEN_LIFETIME if admin else HOME_TOKEN_LIFETIME


def issue(
    secret: str,
    *,
    home_id: str | None = None,
    admin: bool = False,
    expires_in: Expiry = None,
    kind: Kind = "api",
    session_id: str | None = None,
    session_end: float | None = None,
    now: float | None = None,
) -> tuple[str, TokenClaims]:
    """A new signed token and its claims (``create_token`` without the claims)."""
    if not secret:
        raise ValueError("no token secret configured")
    if admin == (home_id is not None):
        raise ValueError("a token is either for one home or an admin token")
    if home_id is not None and not is_identifier(home_id):
        raise ValueError(
            f"home id {home_id!r} is not an identifier: letters and digits first, then letters, digits "
            "and . _ : -, at most 64 characters"
        )
    if expires_in == NEVER and not (admin and kind == "api"):
        raise ValueError("only admin tokens may never expire")
    issued = int(time.time() if now is None else now)
    lifetime = default_lifetime(admin=admin, kind=kind) if expires_in is None else expires_in
    if isinstance(lifetime, timedelta) and lifetime.total_seconds() <= 0:
        raise ValueError("a token's lifetime must be positive")
    expires = None if lifetime == NEVER else issued + int(lifetime.total_seconds())
    end = None if session_end is None else int(session_end)
    if end is not None:
        if end <= issued:
            raise ValueError("the session has ended")
        expires = end if expires is None else min(expires, end)
    claims = TokenClaims(
        jti=new_token_id(),
        kind=kind,
        home=home_id,
        admin=admin,
        iat=issued,
        exp=expires,
        sid=session_id,
        end=end,
    )
    payload = _b64(_encode_claims.encode(claims))
    return f"{PREFIX}{payload}.{_signature(secret, payload)}", claims


def create_token(
    secret: str,
    *,
    home_id: str | None = None,
    admin: bool = False,
    expires_in: Expiry = None,
    kind: Kind = "api",
    now: float | None = None,
) -> str:
    """A new token for one home or an admin token; ``token_id(token)`` tells its id."""
    token, _ = issue(secret, home_id=home_id, admin=admin, expires_in=expires_in, kind=kind, now=now)
    return token


def read_claims(token: str) -> TokenClaims:
    """The claims of a token, signature NOT checked (to show or revoke a token one holds)."""
    if len(token) > MAX_TOKEN_LENGTH or not token.startswith(PREFIX):
        raise InvalidToken("not a Hearth token of this version")
    payload, dot, _signature_part = token[len(PREFIX) :].partition(".")
    if not dot:
        raise InvalidToken("malformed token")
    try:
        return _decode_claims.decode(_unb64(payload))
    except (ValueError, msgspec.DecodeError) as exc:
        raise InvalidToken("malformed token") from exc


def token_id(token: str) -> str:
    """The id of a token (what ``hearth token revoke`` takes)."""
    return read_claims(token).jti


def verify_token(
    secret: str, token: str, *, now: float | None = None, kinds: Iterable[str] = API_KINDS
) -> Principal:
    """The principal a token names, if its signature is good, it has not expired and its kind is one of
    ``kinds``; else ``InvalidToken`` saying which. Revocation is checked by the caller (``Revocations``)."""
    if len(token) > MAX_TOKEN_LENGTH:
        raise InvalidToken("malformed token")
    if not token.startswith(PREFIX):
        raise InvalidToken("not a Hearth token of this version (make a new one: hearth token create)")
    payload, dot, signature = token[len(PREFIX) :].partition(".")
    if not dot or not payload or not signature:
        raise InvalidToken("malformed token")
    if not secret or not hmac.compare_digest(signature.encode(), _signature(secret, payload).encode()):
        raise InvalidToken("bad token signature")
    try:
        claims = _decode_claims.decode(_unb64(payload))
    except (ValueError, msgspec.DecodeError) as exc:
        raise InvalidToken("malformed token") from exc
    if claims.admin == (claims.home is not None) or (
        claims.home is not None and not is_identifier(claims.home)
    ):
        raise InvalidToken("unknown token scope")
    if claims.exp is None and not (claims.admin and claims.kind == "api"):
        raise InvalidToken("a token without an expiry")
    if claims.exp is not None and (time.time() if now is None else now) >= claims.exp:
        raise InvalidToken("token expired")
    if claims.kind not in kinds:
        wanted = " or ".join(sorted(kinds))
        raise InvalidToken(f"a {claims.kind} token cannot be used here (wanted: {wanted} token)")
    return Principal(
        home_id=claims.home,
        admin=claims.admin,
        token_id=claims.jti,
        expires_at=None if claims.exp is None else float(claims.exp),
        session_id=claims.sid,
        session_end=None if claims.end is None else float(claims.end),
        kind=claims.kind,
    )


_DURATION = re.compile(r"^(\d{1,6})([smhd])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> timedelta | Literal["never"]:
    """``15m``, ``12h``, ``90d``, ``30s`` or ``never``; ValueError that says what is accepted."""
    value = text.strip().lower()
    if value == NEVER:
        return NEVER
    match = _DURATION.fullmatch(value)
    if match is None or int(match.group(1)) == 0:
        raise ValueError(f"{text!r} is not a duration: use e.g. 15m, 12h, 90d (s, m, h, d) or never")
    return timedelta(seconds=int(match.group(1)) * _UNIT_S[match.group(2)])
