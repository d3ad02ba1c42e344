"""The gateway's I/O of its own: the inbox's lanes, batched (``inbox_writer``), the broker's access files
and its SIGHUP (``mosquitto_files``) and the wait until a reload is in force (``reload_confirmation``).
Imports ``service/``, never ``entrypoints/``."""
