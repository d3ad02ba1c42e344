"""The shapes Hearth writes and reads, on the wire and in storage: journal facts and inbox requests
(``events`` joins them), the records of the other topics, campaign facts, MQTT topics and payloads,
API tokens, device secret hashes, the one id rule and the snapshot format. msgspec and the standard
library only: the lowest layer, importing nothing else of Hearth."""
