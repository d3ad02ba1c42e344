"""`kill -USR1` makes a service print its asyncio tasks' stacks (hearth_shared.adapters.task_dump)."""

from __future__ import annotations

import asyncio
import os
import signal
import threading

import pytest

from hearth_shared.adapters.task_dump import dump_tasks_on_sigusr1

pytestmark = pytest.mark.unit


async def test_sigusr1_prints_what_each_task_waits_on(capsys: pytest.CaptureFixture[str]) -> None:
    async def stuck_on_purpose() -> None:
        await asyncio.Event().wait()

    waiting = asyncio.create_task(stuck_on_purpose())
    assert dump_tasks_on_sigusr1()
    try:
        os.kill(os.getpid(), signal.SIGUSR1)
        await asyncio.sleep(0.1)
    finally:
        asyncio.get_running_loop().remove_signal_handler(signal.SIGUSR1)
        waiting.cancel()
    assert "stuck_on_purpose" in capsys.readouterr().err


def test_a_loop_outside_the_main_thread_installs_nothing() -> None:
    installed: list[bool] = []
    thread = threading.Thread(target=lambda: installed.append(asyncio.run(_install())))
    thread.start()
    thread.join()
    assert installed == [False]


async def _install() -> bool:
    return dump_tasks_on_sigusr1()
