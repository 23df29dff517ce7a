"""What a gateway tells an MCP server of its caller's client capabilities: the client
features the caller declared (sampling, elicitation, roots) and their sub-fields MCP defines,
nothing made up, in a shape that survives the session id the gateway issues."""

from __future__ import annotations

from protocol import capabilities_of_flags, capability_flags, client_capabilities


def test_only_the_declared_features_and_their_defined_fields_are_kept() -> None:
    declared = {
        "sampling": {"tools": {}, "madeUp": {"x": 1}},
        "elicitation": {"form": {"applyDefaults": True}, "url": {}},
        "roots": {"listChanged": "yes"},  # not a boolean: not kept
        "experimental": {"anything": {}},
    }
    assert client_capabilities(declared) == {
        "sampling": {"tools": {}},
        "elicitation": {"form": {"applyDefaults": True}, "url": {}},
        "roots": {},
    }
    assert client_capabilities({}) == client_capabilities(None) == {}
    assert client_capabilities({"elicitation": True}) == {}  # a feature is an object


def test_the_flags_round_trip_and_an_orphan_flag_is_ignored() -> None:
    declared = {"sampling": {}, "roots": {"listChanged": True}}
    assert capabilities_of_flags(capability_flags(declared)) == declared
    orphan = capability_flags({"elicitation": {"url": {}}}) & ~capability_flags({"elicitation": {}})
    assert capabilities_of_flags(orphan) == {}
