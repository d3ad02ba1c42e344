"""The device gateway's two persistent MQTT sessions, subscribed as its app subscribes them, left behind
with no client connected: as a gateway killed a moment ago (or cut off by its broker's restart) leaves
them. What devices publish meanwhile waits in them for the gateway's return."""

from __future__ import annotations

from hearth_device_gateway.settings import DeviceGatewaySettings
from hearth_devstack.servers.mosquitto import MosquittoBroker
from hearth_shared.adapters.mqtt_link import MqttLink
from hearth_shared.adapters.settings import StackSettings
from hearth_shared.schema.mqtt import ACKS, AVAILABILITY, STATE, wildcard


async def sessions_left_behind(stack: StackSettings, broker: MosquittoBroker) -> DeviceGatewaySettings:
    """Leave the sessions of a gateway of ``stack`` on ``broker``; returns that gateway's settings."""
    settings = DeviceGatewaySettings(
        mqtt_port=broker.platform_port,
        mqtt_password=broker.admin.password,
        instance=f"{stack.topic_prefix}-1",
        stack=stack,
    )
    subscriptions = {"": (STATE,), "-lane": (ACKS, AVAILABILITY)}
    for suffix, channels in subscriptions.items():
        link = MqttLink(
            client_id=f"hearth-gateway-{settings.instance}{suffix}",
            username=settings.mqtt_username,
            password=settings.mqtt_password,
        )
        await link.connect(settings.mqtt_host, settings.mqtt_port)
        for channel in channels:
            link.subscribe(wildcard(channel))
        await link.subscribed()
        await link.disconnect()  # the session stays (and gets what is published meanwhile)
    return settings
