"""Webhook receivers are kept apart (hearth_automations.adapters.webhooks): a receiver that does not answer
holds at most ``PER_RECEIVER`` webhooks in flight, and another home's webhook to another receiver goes out
meanwhile; once it answers, every webhook waiting for it is delivered, and no receiver's entry is left.
A URL no post can use (a planted home fact: the API takes only http(s) URLs) gives up at once, with why."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from hearth_automations.adapters.webhooks import PER_RECEIVER, WebhookSender, receiver

pytestmark = pytest.mark.unit

STUCK, WELL = "http://stuck.example:8080/hook", "https://well.example/hook"


async def test_a_receiver_that_does_not_answer_holds_a_few_places_and_delays_no_other() -> None:
    answer = asyncio.Event()
    in_flight = {STUCK: 0, WELL: 0}
    most = {STUCK: 0, WELL: 0}

    async def handle(request: httpx.Request) -> httpx.Response:
        url = str(request.url)
        in_flight[url] += 1
        most[url] = max(most[url], in_flight[url])
        try:
            if url == STUCK:
                await answer.wait()
            return httpx.Response(204)
        finally:
            in_flight[url] -= 1

    async with httpx.AsyncClient(transport=httpx.MockTransport(handle)) as client:
        sender = WebhookSender(client, attempts=1, backoff_s=0.01, max_backoff_s=0.01)
        stuck = [asyncio.create_task(sender.send(STUCK, "secret", f"n{i}", {"i": i})) for i in range(10)]
        await asyncio.sleep(0.05)
        well = await asyncio.wait_for(sender.send(WELL, "secret", "w", {}), timeout=5)
        assert well.delivered
        assert most[STUCK] == PER_RECEIVER and not any(t.done() for t in stuck)

        answer.set()
        outcomes = await asyncio.wait_for(asyncio.gather(*stuck), timeout=5)
    assert all(o.delivered for o in outcomes)
    assert most[STUCK] == PER_RECEIVER
    assert sender.receivers.gates == {}


def test_a_receiver_is_its_scheme_host_and_port() -> None:
    assert receiver("https://h.example/a?b=1") == receiver("https://h.example/other")
    assert receiver("https://h.example/a") != receiver("http://h.example/a")
    assert receiver("http://h.example:8080/a") != receiver("http://h.example:8081/a")


async def test_a_url_no_post_can_use_gives_up_at_once_with_why() -> None:
    async with httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(204))) as client:
        sender = WebhookSender(client, attempts=6, backoff_s=0.01, max_backoff_s=0.01)
        outcome = await sender.send("http://receiver\x00.example/hook", "secret", "n", {})
    assert not outcome.delivered and outcome.attempts == 1 and "non-printable" in outcome.error
    assert sender.receivers.gates == {}
