"""An idle sandbox's MCP servers heard between calls: the subscription hold and the watch.

An `mcp_stdio` server subscribed to a resource (`resources/subscribe`, relayed in the caller's
own sandbox) tells of its updates whenever they happen, mostly while no call runs. The call
that subscribed it carries a `tools.calls.SubscriptionHold`: the pool then keeps the sandbox
from idle reaping for `hold_s` after that call (each later subscribe renews it; past it the
sandbox is reaped as any idle one), and hands what its servers notify
(`runner_wire.NOTICE_METHODS`) to `heard`, the gateway's relay to the identity's listeners.

While such a sandbox sits idle, an `IdleWatch` asks its runner for its servers' notices (a
watch request, `runner_wire.WATCH`) and reads them as they come. The sandbox's next call
stops the watch first (`stop`: a cancel frame, then the watch's answer, so the channel is in
step again) and a sandbox torn down ends it (`abandon`). A runner that does not answer the
stop within the time a cancelled call's runner has (`instance.CANCEL_ANSWER_S`) loses its
sandbox, as such a call's does.

Servers are hostile: a sandbox passes on at most `NOTICES_PER_S` notices a second (the rest are
dropped), each at most `EVENT_LIMIT` bytes (the runner's bound, read again here).
"""

from __future__ import annotations

import time
from typing import Any

import anyio

from sandbox.instance.channel import ChannelClosed, OversizedFrame, RunnerChannel
from sandbox.runner import (
    CANCEL,
    EVENT_LIMIT,
    NOTICE,
    NOTIFICATION_FIELD,
    RESULT,
    SOURCE_FIELD,
    WATCH,
    frame_limit,
)
from tools.calls import Heard

NOTICES_PER_S = 20  # a sandbox's notices passed on per second; the rest are dropped


class NoticeGate:
    """A sandbox's notices, checked and bounded, passed to whoever holds it now."""

    def __init__(self) -> None:
        self.heard: Heard | None = None
        self._second = 0
        self._passed = 0
        self.dropped = 0

    def notice(self, frame: dict[str, Any]) -> None:
        source, message = frame.get(SOURCE_FIELD), frame.get(NOTIFICATION_FIELD)
        if self.heard is None or not isinstance(source, str) or not isinstance(message, dict):
            self.dropped += 1
            return
        second = int(time.monotonic())
        if second != self._second:
            self._second, self._passed = second, 0
        if self._passed >= NOTICES_PER_S:
            self.dropped += 1
            return
        self._passed += 1
        self.heard(source, message)


class IdleWatch:
    """One watch of an idle sandbox's servers, from its request to its answer."""

    def __init__(self, channel: RunnerChannel, watch_id: int, gate: NoticeGate) -> None:
        self.channel = channel
        self.watch_id = watch_id
        self.gate = gate
        self.sent = False  # the watch request went to the runner
        self.stopping = False
        self.answered = False  # the runner answered the watch: the channel is in step
        self.done = anyio.Event()
        self._scope = anyio.CancelScope()

    async def run(self) -> None:
        """Ask the runner for its servers' notices and pass them on until it answers."""
        try:
            with self._scope:
                if self.stopping:  # a call came before the watch began: nothing to undo
                    return
                self.sent = True
                with anyio.CancelScope(shield=True):  # a frame goes whole
                    await self.channel.send({"type": WATCH, "id": self.watch_id})
                while not self.answered:
                    frame = await self.channel.receive(frame_limit(EVENT_LIMIT))
                    if frame.get("id") != self.watch_id:
                        return  # not this watch's: the channel cannot be trusted
                    if frame.get("type") == NOTICE:
                        self.gate.notice(frame)
                    elif frame.get("type") == RESULT:
                        self.answered = True
        except (ChannelClosed, OversizedFrame):
            pass  # the sandbox is gone, or its runner broke the protocol: `stop` says so
        finally:
            self.done.set()

    async def stop(self, answer_s: float) -> bool:
        """End the watch before the sandbox serves a call: True when the runner answered it
        within `answer_s` (or it never began), False when the sandbox must be torn down."""
        self.stopping = True
        if not self.sent:
            return True
        try:
            with anyio.CancelScope(shield=True):
                await self.channel.send({"type": CANCEL, "id": self.watch_id})
        except ChannelClosed:
            return False
        with anyio.move_on_after(answer_s):
            await self.done.wait()
        return self.answered

    def abandon(self) -> None:
        """The sandbox is being torn down: stop reading at once."""
        self.stopping = True
        self._scope.cancel()


__all__ = ["IdleWatch", "NoticeGate"]
