"""Device secrets and their $7$ PBKDF2-SHA512 hashes (hearth_shared.schema.credentials)."""

from __future__ import annotations

import base64
import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from hearth_shared.schema.credentials import (
    ITERATIONS,
    InvalidPasswordHash,
    hash_secret,
    is_password_hash,
    new_secret,
    parse_hash,
    verify_secret,
)

pytestmark = pytest.mark.unit


def test_a_hash_is_pbkdf2_sha512_in_mosquittos_format() -> None:
    salt = bytes(range(12))
    password_hash = hash_secret("s3cret", salt=salt)
    expected = hashlib.pbkdf2_hmac("sha512", b"s3cret", salt, ITERATIONS)
    assert (
        password_hash
        == f"$7${ITERATIONS}${base64.b64encode(salt).decode()}${base64.b64encode(expected).decode()}"
    )
    assert parse_hash(password_hash) == (ITERATIONS, salt, expected)


def test_each_hash_has_its_own_salt_and_verifies_only_its_secret() -> None:
    secret = new_secret()
    first, second = hash_secret(secret), hash_secret(secret)
    assert first != second
    assert verify_secret(secret, first) and verify_secret(secret, second)
    assert not verify_secret(secret + "x", first)


def test_secrets_are_long_and_distinct() -> None:
    secrets_ = {new_secret() for _ in range(100)}
    assert len(secrets_) == 100
    assert all(len(s) >= 43 for s in secrets_)


@pytest.mark.parametrize(
    "bad",
    ["", "plain", "$6$101$abc$def", "$7$x$AAAA$AAAA", "$7$101$AAAA", "$7$101$!!!!$AAAA", "$7$101$AAAA$AAAA"],
)
def test_malformed_hashes_are_refused_with_a_reason(bad: str) -> None:
    assert not is_password_hash(bad)
    assert not verify_secret("anything", bad)
    with pytest.raises(InvalidPasswordHash):
        parse_hash(bad)


@pytest.mark.skipif(shutil.which("mosquitto_passwd") is None, reason="Debian's mosquitto is not installed")
def test_hashes_mosquitto_passwd_writes_verify_here(tmp_path: Path) -> None:
    """The same format both ways: a hash Mosquitto's own tool made verifies with verify_secret."""
    passwd = tmp_path / "passwd"
    passwd.touch()
    subprocess.run(["mosquitto_passwd", "-b", str(passwd), "dev-1", "s3cret"], check=True, timeout=30)
    username, _, password_hash = passwd.read_text().strip().partition(":")
    assert username == "dev-1" and is_password_hash(password_hash)
    assert verify_secret("s3cret", password_hash) and not verify_secret("s3cre", password_hash)
