"""The runner's bounds on a call's events are the call contract's: the runner, standard library
only and mounted alone, spells them on its own wire, and the host checks what it forwards
against `tools.calls` again. Two different values would let a runner forward what the host
then drops, or make the host refuse what the runner promised to pass."""

from __future__ import annotations

import sandbox.runner as wire
import tools.calls as contract
from tools.calls import call_event_sink


def test_the_runner_bounds_a_calls_events_as_the_contract_does() -> None:
    assert wire.EVENT_LIMIT == contract.MAX_EVENT_BYTES
    assert wire.MAX_EVENTS == contract.MAX_EVENTS
    assert wire.MAX_PENDING_REQUESTS == contract.MAX_PENDING_REQUESTS
    assert wire.REQUEST_LIMIT == contract.REQUEST_LIMIT
    assert wire.NOTIFICATIONS == call_event_sink.NOTIFICATIONS
