"""The read-model tables (SQLAlchemy Core). Their home schema is chosen at run time (live or rebuild)."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    Uuid,
)
from sqlalchemy.dialects.postgresql import JSON, JSONB

metadata = MetaData()

twins = Table(
    "twins",
    metadata,
    Column("device_id", String, primary_key=True),
    Column("home_id", String, nullable=False, index=True),
    Column("device_type", String, nullable=False),
    Column("name", Text, nullable=False),
    Column("version", BigInteger, nullable=False),
    Column("online", Boolean, nullable=False),
    Column("view", JSONB, nullable=False),  # the contract's twin JSON, served as is
    Column("state", LargeBinary, nullable=False),  # the domain Twin (msgpack), folded by evolve
    Column("updated_at", DateTime(timezone=True), nullable=False),
)

device_events = Table(
    "device_events",
    metadata,
    Column("device_id", String, primary_key=True),
    Column("version", BigInteger, primary_key=True),
    Column("event_id", Uuid, nullable=False),
    Column("type", String, nullable=False),
    Column("home_id", String, nullable=False),
    Column("occurred_at", DateTime(timezone=True), nullable=False),
    Column("recorded_at", DateTime(timezone=True), nullable=False),
    Column("correlation_id", Uuid),
    Column("event", JSON, nullable=False),  # the whole record as on the wire (its text, as it came)
)

commands = Table(
    "commands",
    metadata,
    Column("command_id", Uuid, primary_key=True),
    Column("device_id", String, nullable=False, index=True),
    Column("home_id", String, nullable=False, index=True),
    Column("name", String, nullable=False),
    Column("params", JSONB, nullable=False),
    Column("status", String, nullable=False),
    Column("reason", String),
    Column("message", Text),
    Column("requested_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("history", JSONB, nullable=False),  # [{status, at, version, reason?}]
)

alerts = Table(
    "alerts",
    metadata,
    Column("event_id", Uuid, primary_key=True),
    Column("device_id", String, nullable=False, index=True),
    Column("home_id", String, nullable=False, index=True),
    Column("version", BigInteger, nullable=False),
    Column("kind", String, nullable=False),
    Column("metric", String, nullable=False),
    Column("value", Float, nullable=False),
    Column("score", Float, nullable=False),
    Column("threshold", Float, nullable=False),
    Column("model_version", Integer, nullable=False),
    Column("occurred_at", DateTime(timezone=True), nullable=False),
    Index("alerts_home_time", "home_id", "occurred_at", "event_id"),
    Index("alerts_device_time", "device_id", "occurred_at", "event_id"),
)

rollups = Table(
    "rollups",
    metadata,
    # f"{scope}:{id}:{window_len}:{window_start_iso}", the record key on the rollups topic; the runtime
    # report's window "day" names a local date (hearth_shared.schema.runtime_records)
    Column("key", Text, primary_key=True),
    Column("scope", String, nullable=False),  # "device" or "home"
    Column("subject_id", String, nullable=False),  # the device_id or home_id
    Column("window", String, nullable=False),  # the window length as the key spells it
    Column("window_start", DateTime(timezone=True), nullable=False),
    Column("value", JSONB, nullable=False),  # the record's value as it arrived
    Index("rollups_subject_time", "scope", "subject_id", "window_start"),
)

# From the home journal (projection/home_rules.py): runs and notification outcomes, history the query API
# no longer holds in memory. ``journal_partition``/``journal_offset``: the record it came from (a home's
# facts share a partition, so the offset orders them; a rebuild carries over rows the topic lost).
automation_runs = Table(
    "automation_runs",
    metadata,
    Column("run_id", Uuid, primary_key=True),
    Column("automation_id", Uuid, nullable=False),
    Column("home_id", String, nullable=False),
    Column("ran_at", DateTime(timezone=True), nullable=False),
    Column("journal_partition", Integer, nullable=False),
    Column("journal_offset", BigInteger, nullable=False),
    Column("run", JSON, nullable=False),  # the RunPayload as on the wire (its text)
    Index("automation_runs_newest", "automation_id", "journal_offset", "run_id"),
)

notification_outcomes = Table(
    "notification_outcomes",
    metadata,
    Column("notification_id", Uuid, primary_key=True),
    Column("home_id", String, nullable=False),
    Column("outcome", String, nullable=False),  # "notification.delivered" or "notification.gave_up"
    Column("at", DateTime(timezone=True), nullable=False),
    Column("journal_partition", Integer, nullable=False),
    Column("journal_offset", BigInteger, nullable=False),
    Column("payload", JSON, nullable=False),  # the NotificationPayload as on the wire (its text)
    Index("notification_outcomes_newest", "home_id", "journal_offset", "notification_id"),
)

meta = Table(
    "meta",
    metadata,
    Column("id", Integer, CheckConstraint("id = 1"), primary_key=True),
    # +1 at every swap: a projector that sees another generation than it loaded reloads its positions
    Column("generation", BigInteger, nullable=False),
)

consumed_offsets = Table(
    "consumed_offsets",
    metadata,
    Column("consumer", String, primary_key=True),
    Column("topic", String, primary_key=True),
    Column("partition", Integer, primary_key=True),
    Column("next_offset", BigInteger, nullable=False),
)
