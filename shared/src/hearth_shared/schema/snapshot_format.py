"""How a fold's snapshot is written and read back across releases (``hearth_shared.adapters.topic_follower``
saves them): one ``SnapshotCodec`` per fold, over a msgspec struct whose first field is ``format: int``.

Why versioned and not pickled: a snapshot may be all that is left of facts a retention window removed, so
it must stay readable after an upgrade, and it is data, never code. The rules: a later release may add
fields with defaults to a format; anything else bumps ``format`` and keeps a reader for the old one. A
snapshot whose format this release does not read raises ``ValueError`` before anything is decoded
further, and the follower then folds from the first offset with a warning (never a crash loop).

A fold that cannot be saved at some moment (its state holds a decision not yet on the broker) raises
``NotNow`` from ``snapshot()``: the follower tries again after its next poll, quietly, since that is the
fold's rule and not a failure.

Pure: msgspec only, so the domain's folds (``home_view``, ``campaign_book``) use it too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

import msgspec

S = TypeVar("S", bound=msgspec.Struct)

Positions = dict[str, dict[int, int]]  # topic -> partition -> offset of the first record not folded


class NotNow(Exception):
    """Raised by a fold's ``snapshot()``: no snapshot at this moment (the message says why); try later."""


class _FormatOnly(msgspec.Struct):
    format: int


class SnapshotCodec(Generic[S]):
    """Encodes a fold's snapshot ``struct`` (msgpack, or JSON where a value needs it) and decodes one
    only if its ``format`` is ``version``."""

    def __init__(self, what: str, struct: type[S], version: int, *, json: bool = False) -> None:
        self.what = what
        self.version = version
        self._encode = (
            msgspec.json.Encoder() if json else msgspec.msgpack.Encoder(uuid_format="bytes")
        ).encode
        protocol = msgspec.json if json else msgspec.msgpack
        self._format = protocol.Decoder(_FormatOnly).decode
        self._decode: Callable[[bytes], S] = protocol.Decoder(struct).decode

    def encode(self, snapshot: S) -> bytes:
        found = getattr(snapshot, "format", None)
        if found != self.version:
            raise ValueError(
                f"{self.what} snapshot built as format {found}, this codec writes {self.version}"
            )
        return self._encode(snapshot)

    def decode(self, data: bytes) -> S:
        """The snapshot; raises (``ValueError``, ``msgspec.DecodeError``) for one this release cannot read."""
        found = self._format(data).format
        if found != self.version:
            raise ValueError(
                f"{self.what} snapshot format {found} is not one this release reads ({self.version})"
            )
        return self._decode(data)
