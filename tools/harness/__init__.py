"""Tools for tests and benchmarks, kept apart from the product's built-ins.

Never served unless listed in `CONCLAVE_TOOL_MODULES`: `tools.harness.misbehaving` (what an
attacker's or a buggy tool would do), `tools.harness.hostile` (a tenant's tool code forging
its own outcome), `tools.harness.faults` (injected latency and failure
modes), `tools.harness.agentdojo_suites` (AgentDojo's task suites as tools). They live inside
the `tools` package so the sandbox, which mounts `tools`, loads them like any tool module.
Two are MCP servers, not tool modules, started by path as `mcp_stdio` sources:
`stdio_mcp_server.py` (faults, standard library only) and `conformance_server.py` (what the
official conformance suite's server scenarios call; needs fastmcp).
"""
