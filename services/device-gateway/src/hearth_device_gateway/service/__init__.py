"""What the gateway decides, free of any MQTT or Kafka client: a device message -> its inbox request
(``edge``), which gateway takes a device (``slices``), the broker's access from the journal's facts
(``mosquitto_access``) and what to say for devices that cannot (``availability_keeper``, given a
``publish``). Imports no broker, web or database client (an import contract)."""
