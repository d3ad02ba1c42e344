"""Where the worker's work comes in: the inbox, read in batches for the partitions whose twins it holds
(``inbox``). It drives ``service/`` through ``adapters/``; nothing below imports it."""
