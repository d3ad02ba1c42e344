"""Where the gateway's work comes in: devices' MQTT messages (``uplink``), dispatched commands on the
device-bound topic (``downlink``) and the journal's credential facts (``broker_access_follower``). They
drive ``service/`` through ``adapters/``; nothing below imports them."""
