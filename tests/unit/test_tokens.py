"""API tokens: ids, expiry on a fake clock, tampering, the re-split forgery of the first format, kinds,
revocation, durations, and the 401s the shared FastAPI dependency answers."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from datetime import timedelta

import pytest
from fastapi import HTTPException

from hearth_shared.schema.auth import (
    ADMIN_TOKEN_LIFETIME,
    HOME_TOKEN_LIFETIME,
    InvalidToken,
    Principal,
    Revocations,
    create_token,
    issue,
    parse_duration,
    read_claims,
    token_id,
    verify_token,
)
from hearth_shared.web.http import authenticate

pytestmark = pytest.mark.unit

SECRET = "unit-test-secret"
T0 = 1_800_000_000.0  # the fake clock's start (Unix seconds)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def old_format_token(secret: str, scope: str, nonce: str) -> str:
    """A token as the first format made them: the signature covered ``scope|nonce`` without framing."""
    signature = b64(hmac.new(secret.encode(), f"{scope}|{nonce}".encode(), hashlib.sha256).digest()[:24])
    return f"hth_{b64(scope.encode())}.{signature}.{nonce}"


def test_a_home_token_names_its_home_and_has_an_id_and_the_default_expiry() -> None:
    token = create_token(SECRET, home_id="h1", now=T0)
    principal = verify_token(SECRET, token, now=T0)
    assert principal.home_id == "h1" and not principal.admin
    assert principal.token_id == token_id(token) and len(principal.token_id) == 24
    assert principal.expires_at == T0 + HOME_TOKEN_LIFETIME.total_seconds()
    assert principal.may_see("h1") and not principal.may_see("h2")
    assert token_id(create_token(SECRET, home_id="h1", now=T0)) != principal.token_id  # ids are unique


def test_an_admin_token_expires_after_30_days_unless_made_never_to() -> None:
    admin = verify_token(SECRET, create_token(SECRET, admin=True, now=T0), now=T0)
    assert admin.admin and admin.home_id is None and admin.may_see("any")
    assert admin.expires_at == T0 + ADMIN_TOKEN_LIFETIME.total_seconds()
    forever = create_token(SECRET, admin=True, expires_in="never", now=T0)
    assert verify_token(SECRET, forever, now=T0 + 10 * 365 * 86400).expires_at is None
    with pytest.raises(ValueError, match="only admin tokens may never expire"):
        create_token(SECRET, home_id="h1", expires_in="never")


def test_a_token_expires_on_the_clock() -> None:
    token = create_token(SECRET, home_id="h1", expires_in=timedelta(minutes=15), now=T0)
    assert verify_token(SECRET, token, now=T0 + 15 * 60 - 1).home_id == "h1"
    with pytest.raises(InvalidToken, match="token expired"):
        verify_token(SECRET, token, now=T0 + 15 * 60)
    with pytest.raises(HTTPException) as refused:
        authenticate(SECRET, token, Revocations(), now=T0 + 3600)
    assert refused.value.status_code == 401 and "token expired" in refused.value.detail


def test_tampered_claims_a_tampered_signature_or_another_secret_are_refused() -> None:
    token = create_token(SECRET, home_id="h1", now=T0)
    payload, signature = token.removeprefix("hth1_").split(".")
    claims = json.loads(unb64(payload))
    for change in ({"home": "h2"}, {"exp": claims["exp"] + 86400}, {"admin": True, "home": None}):
        forged = b64(json.dumps({**claims, **change}, separators=(",", ":")).encode())
        with pytest.raises(InvalidToken, match="bad token signature"):
            verify_token(SECRET, f"hth1_{forged}.{signature}", now=T0)
    flipped = signature[:-2] + ("AA" if signature[-2:] != "AA" else "BB")
    with pytest.raises(InvalidToken, match="bad token signature"):
        verify_token(SECRET, f"hth1_{payload}.{flipped}", now=T0)
    with pytest.raises(InvalidToken, match="bad token signature"):
        verify_token("another-secret", token, now=T0)
    for garbage in ("", "hth1_", "hth1_abc", "hth1_.sig", "x" * 5000, "hth1_" + "\x00" + ".x"):
        with pytest.raises(InvalidToken):
            verify_token(SECRET, garbage, now=T0)


def test_the_first_formats_re_split_forgery_no_longer_works() -> None:
    """With the first format, the holder of a token for home ``B|x`` (nonce n) could move ``|x`` from
    the scope into the nonce and hold a valid token for home ``B``: the signed bytes were the same."""
    token = old_format_token(SECRET, "home:B|x", "n0nce")
    _head, signature, _nonce = token.split(".")
    forged = f"hth_{b64(b'home:B')}.{signature}.x|n0nce"
    assert hmac.compare_digest(  # the forgery was real: same signed bytes
        signature,
        b64(hmac.new(SECRET.encode(), b"home:B|x|n0nce", hashlib.sha256).digest()[:24]),
    )
    for old in (token, forged):
        with pytest.raises(InvalidToken, match="not a Hearth token of this version"):
            verify_token(SECRET, old, now=T0)
    # Today: a home id cannot hold '|' (or any framing character), and the signature covers the exact
    # encoded claims, so re-splitting the new format changes the signed bytes.
    with pytest.raises(ValueError, match="not an identifier"):
        create_token(SECRET, home_id="B|x")
    real = create_token(SECRET, home_id="B.x", now=T0)
    payload, signature = real.removeprefix("hth1_").split(".")
    for cut in range(1, len(payload)):
        moved = f"hth1_{payload[:cut]}.{payload[cut:]}{signature}"
        with pytest.raises(InvalidToken):
            verify_token(SECRET, moved, now=T0)
    claims = json.loads(unb64(payload))
    as_b = b64(json.dumps({**claims, "home": "B"}, separators=(",", ":")).encode())
    with pytest.raises(InvalidToken, match="bad token signature"):
        verify_token(SECRET, f"hth1_{as_b}.{signature}", now=T0)


def test_a_validly_signed_token_with_a_bad_home_id_or_no_expiry_is_refused() -> None:
    """Defence in depth: claims this code would never sign are refused even when signed."""

    def signed(claims: dict[str, object]) -> str:
        payload = b64(json.dumps(claims, separators=(",", ":")).encode())
        mac = hmac.new(SECRET.encode(), f"hth1.{payload}".encode(), hashlib.sha256).digest()
        return f"hth1_{payload}.{b64(mac)}"

    base = {"jti": secrets.token_hex(12), "iat": int(T0), "exp": int(T0) + 60}
    assert verify_token(SECRET, signed({**base, "home": "h1"}), now=T0).home_id == "h1"
    for claims, message in (
        ({**base, "home": "B|x"}, "unknown token scope"),
        ({**base, "home": "h\x00"}, "unknown token scope"),
        ({**base, "home": "h1", "admin": True}, "unknown token scope"),
        ({**base}, "unknown token scope"),
        ({**base, "home": "h1", "exp": None}, "without an expiry"),
        ({**base, "home": "h1", "extra": 1}, "malformed token"),
    ):
        with pytest.raises(InvalidToken, match=message):
            verify_token(SECRET, signed(claims), now=T0)


def test_a_link_token_is_good_only_for_a_session() -> None:
    link = create_token(SECRET, home_id="h1", kind="link", now=T0)
    with pytest.raises(InvalidToken, match="a link token cannot be used here"):
        verify_token(SECRET, link, now=T0)
    assert verify_token(SECRET, link, now=T0, kinds={"link"}).kind == "link"
    with pytest.raises(InvalidToken, match="token expired"):
        verify_token(SECRET, link, now=T0 + 15 * 60, kinds={"link"})
    page, claims = issue(SECRET, home_id="h1", kind="page", session_id=token_id(link), now=T0)
    principal = verify_token(SECRET, page, now=T0)
    assert principal.kind == "page" and principal.session_id == token_id(link)
    assert principal.token_ids() == (claims.jti, token_id(link))


def test_a_page_session_has_a_hard_end_that_no_renewal_passes() -> None:
    page, claims = issue(SECRET, home_id="h1", kind="page", session_id="s1", session_end=T0 + 100, now=T0)
    assert claims.exp == T0 + 100  # not the 15 minutes a page token would otherwise get
    principal = verify_token(SECRET, page, now=T0 + 99)
    assert principal.session_end == T0 + 100 and principal.session_id == "s1"
    renewed, claims = issue(SECRET, home_id="h1", kind="page", session_end=T0 + 100, now=T0 + 90)
    assert claims.exp == T0 + 100
    with pytest.raises(ValueError, match="the session has ended"):
        issue(SECRET, home_id="h1", kind="page", session_end=T0 + 100, now=T0 + 100)
    with pytest.raises(InvalidToken, match="token expired"):
        verify_token(SECRET, renewed, now=T0 + 100)


def test_revocation_names_a_token_or_its_page_session() -> None:
    revocations = Revocations()
    token = create_token(SECRET, home_id="h1", now=T0)
    link_id = token_id(create_token(SECRET, home_id="h1", kind="link", now=T0))
    page, _ = issue(SECRET, home_id="h1", kind="page", session_id=link_id, now=T0)
    assert authenticate(SECRET, token, revocations, now=T0).home_id == "h1"
    revocations.add(token_id(token))
    with pytest.raises(HTTPException) as refused:
        authenticate(SECRET, token, revocations, now=T0)
    assert (refused.value.status_code, refused.value.detail) == (401, "invalid token: token revoked")
    assert authenticate(SECRET, page, revocations, now=T0).home_id == "h1"
    revocations.add(link_id)  # the page session's link: every page token of that session ends
    with pytest.raises(HTTPException, match="401"):
        authenticate(SECRET, page, revocations, now=T0)
    assert token_id(token) in revocations and len(revocations) == 2


def test_why_a_token_that_was_good_ended() -> None:
    revocations = Revocations()
    principal = Principal(home_id="h1", token_id="t1", expires_at=T0 + 60)
    assert revocations.why_ended(principal, T0) is None
    assert revocations.why_ended(principal, T0 + 60) == "token expired"
    revocations.add("t1")
    assert revocations.why_ended(principal, T0) == "token revoked"
    assert revocations.why_ended(Principal(home_id=None, admin=True), T0) is None


def test_no_token_is_a_401_that_says_how_to_send_one() -> None:
    with pytest.raises(HTTPException) as refused:
        authenticate(SECRET, None, Revocations())
    assert refused.value.status_code == 401 and "Authorization: Bearer" in refused.value.detail


def test_read_claims_shows_a_token_without_its_secret() -> None:
    token = create_token(SECRET, home_id="h1", expires_in=timedelta(hours=12), now=T0)
    claims = read_claims(token)
    assert (claims.home, claims.exp, claims.kind) == ("h1", int(T0) + 12 * 3600, "api")
    with pytest.raises(InvalidToken):
        read_claims("hth_old.format.token")


@pytest.mark.parametrize(
    ("text", "seconds"), [("15m", 900), ("12h", 43200), ("90d", 7776000), ("30s", 30), (" 2H ", 7200)]
)
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


def test_never_and_bad_durations() -> None:
    assert parse_duration("never") == "never"
    for bad in ("", "0d", "15", "1w", "-5m", "1.5h", "9999999d"):
        with pytest.raises(ValueError, match="not a duration"):
            parse_duration(bad)
