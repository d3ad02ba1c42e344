"""The read models: the journal projected into PostgreSQL views and a Redis twin cache (the write side),
and the query API that serves them over HTTP and a websocket (the read side). Two processes
(``python -m hearth_read_models projector`` and ``... api``) and the operator's rebuild and verify run
from this package. Its folders are its roles; pyproject.toml's import contracts, written over the
folders, hold them apart: layers (highest first) entry points > query | rebuild > live | projection >
store | settings ("a | b": neither imports the other), CQRS both ways (query and live import nothing of
projection or rebuild, and the other way round), no import cycle inside a folder, and the pure parts
(``projection/rules``, ``projection/home_rules``, ``rebuild/archive_order``) free of any database,
broker or web. A new module goes
in the folder of its role; no contract lists it.

The root: ``__main__`` (``python -m hearth_read_models projector|api|migrate|init``, the entry point
compose.yaml, the Dockerfile and the local stack start), ``probe`` (the projector's health check,
``python -m hearth_read_models.probe``) and ``settings`` (``HEARTH_READ_MODELS_``, read by both
processes and the rebuild). The entry points may import every folder; ``settings`` imports nothing of
the package.

``store/``: what both sides share of the stores, declared once. The PostgreSQL view tables
(``tables``) with their Alembic migrations (``migrations/``), engines, connections and the swap lock's
name (``db``), and the Redis twin cache's keys, the per-home change channels and their message
(``live_channels``: it sits here, not in ``live/``, because the projector writes what the websocket
reads). The projector writes these, the query side reads them; they are the only place the two sides
meet, so a table, a key or a message field changes here or nowhere. Imports nothing of the package.

``projection/``: the live projector. The projection rules (``rules``: a fact -> view rows, pure;
``home_rules``: a home fact -> an automation run or notification outcome row, pure), the core that reads
the journal (and the rollups and the home journal) in batches and folds them into its caches
(``projector`` over ``journal_source``), the one transaction that writes a batch with its offsets
(``view_store``), the live sink that takes the swap lock, checks the generation and publishes to Redis
(``live_sink``), what every writer of a view schema reads of it (``view_meta``: its generation and
offsets; here and not in ``store/`` because no reader needs it), and the projector process's composition
root (``app``).
Imports ``store/`` and ``settings`` only.

``rebuild/``: ``hearth rebuild`` and ``hearth verify`` (``run``). A replay into a fresh schema by the
same projector with another sink (``replay``, its child processes ``replay_shares``, ``replay_sink``),
from the journal or first from its Parquet archive (``archive_source``, ``archive_order``); checked
(``checksums``; the runs and outcomes whose home-journal records are gone, carried over from the live
views: ``home_carry``), swapped in under the live projector's lock (``swap``) with the Redis cache refreshed
(``cache_refresh``), or, for verify, compared with the live views row by row (``table_diff``). Imports
``projection/`` (the projector and its sources), ``store/`` and ``settings``; never the read side.

``query/``: the query API. Its composition root and the reads of the projected views (``app``:
devices, their history, commands, alerts, rollups), the read-your-writes wait and what a caller may see
(``reads``), the edge's parameters and paging cursors (``query_params``), and the routes that read
elsewhere: the home journal and the campaigns topic folded in memory (``schedule_views``,
``automation_views``, ``campaign_views``), a stretch of the journal (``backtest_views``), the runtime
report's days in the rollups table (``runtime_views``) and the device types' declarations
(``type_schemas``). ``app`` mounts ``live/``'s websocket, page and session too,
so ``query/`` sits above ``live/``. Imports ``live/``, ``store/`` and ``settings``; never
``projection/`` or ``rebuild/``.

``live/``: the live page and what feeds it. ``WS /v1/subscribe`` (``subscriptions``): one ``Feed`` per
socket (``subscription_feed``) over the process's ``Hub`` of Redis subscriptions
(``subscription_hub``), what a client may send and the close codes (``subscribe_message``), the
transport that closes a client that does not read (``ws_protocol``); the page and its static files
(``page``, ``static/``) and the page's short-lived token (``session``). Imports ``store/`` and
``settings`` only.
"""
