"""The I/O behind the service layer's ports: the inbox and the home journal on Kafka (``command_path``),
notifications as signed webhooks over httpx (``webhooks``) (the package's docstring says what each folder
may import)."""
