"""What the driver knows of the fleet, free of any Kafka client: the devices and the admin commands a
campaign awaits, folded from the journal and saved in snapshots (``fleet_view``); the decisions are the
domain's (``hearth_shared.domain.campaign_*``). Imports no broker, web or database client."""
