"""How twins are stored (``encode_twin``, ``decode_twin``): msgpack arrays, and twins stored as maps before
2026-11-29 still read, so an upgraded worker keeps its table and the projector its cache."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from hearth_shared.domain import CommandState, Twin, decode_twin, encode_twin
from hearth_shared.domain.twin import Quarantine

pytestmark = pytest.mark.unit

T0 = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)
COMMAND = uuid.UUID("6f1c2a34-0000-4000-8000-000000000001")
# A twin with a command under way and a quarantine, as the code of 2026-11-28 stored it (a map; no
# ``older_key_seqs`` yet), encoded by that code.
STORED_AS_MAP = bytes.fromhex(
    "de0014a96465766963655f6964a474682d31a7686f6d655f6964a3682d31ab6465766963655f74797065aa746865726d"
    "6f73746174a46e616d65a448616c6ca76465736972656481a87461726765745f63cb4035800000000000a87265706f72"
    "74656483a9687661635f6d6f6465a468656174a87461726765745f63cb4034000000000000a9616d6269656e745f63cb"
    "4033800000000000a776657273696f6e07a66f6e6c696e65c3a96c6173745f7365656ed6ff6b0bdb80aa6f66666c696e"
    "655f6174c0aa757064617465645f6174d6ff6b0bdb80af6c6173745f6465766963655f7365712aa8636f6d6d616e6473"
    "81d92436663163326133342d303030302d343030302d383030302d30303030303030303030303188aa636f6d6d616e64"
    "5f6964d92436663163326133342d303030302d343030302d383030302d303030303030303030303031a46e616d65b673"
    "65745f7461726765745f74656d7065726174757265a6706172616d7381a87461726765745f63cb4035800000000000a7"
    "73657474696e67a6746172676574a76465736972656481a87461726765745f63cb4035800000000000a6737461747573"
    "aa64697370617463686564aa657870697265735f6174d6ff6b0bdcacac7265717565737465645f6174d6ff6b0bdb80a8"
    "66696e697368656491d92436663163326133342d303030302d343030302d383030302d303030303030303030303030a9"
    "73696d756c61746564c2ad63726564656e7469616c5f6964d92436663163326133342d303030302d343030302d383030"
    "302d303030303030303030306331b37265766f6b65645f63726564656e7469616c7390aa71756172616e74696e6582a6"
    "726561736f6ea76c65616b696e67a573696e6365d6ff6b0bdb80a57368617264a130b16c6f616465645f63726564656e"
    "7469616cc0"
)


def _twin() -> Twin:
    return Twin(
        device_id="th-1", home_id="h-1", device_type="thermostat", name="Hall", desired={"target_c": 21.5},
        reported={"hvac_mode": "heat", "target_c": 20.0, "ambient_c": 19.5}, version=7, online=True,
        last_seen=T0, updated_at=T0, last_device_seq=42,
        commands={str(COMMAND): CommandState(
            command_id=COMMAND, name="set_target_temperature", params={"target_c": 21.5}, setting="target",
            desired={"target_c": 21.5}, status="dispatched", expires_at=T0 + timedelta(minutes=5),
            requested_at=T0,
        )},
        finished=("6f1c2a34-0000-4000-8000-000000000000",),
        credential_id=uuid.UUID("6f1c2a34-0000-4000-8000-0000000000c1"),
        quarantine=Quarantine(reason="leaking", since=T0),
    )  # fmt: skip


def test_a_twin_stored_as_a_map_reads_as_the_same_twin() -> None:
    assert decode_twin(STORED_AS_MAP) == _twin()


def test_a_twin_is_stored_as_an_array_without_field_names_and_reads_back() -> None:
    twin = _twin()
    stored = encode_twin(twin)
    assert decode_twin(stored) == twin
    assert b"device_id" not in stored and b"command_id" not in stored and b"reason" not in stored
    assert len(stored) < 0.65 * len(STORED_AS_MAP)


def test_a_stored_map_without_a_field_the_twin_needs_is_refused_by_name() -> None:
    with pytest.raises(msgspec.ValidationError, match="device_type"):
        decode_twin(msgspec.msgpack.encode({"device_id": "th-1", "home_id": "h-1"}))
