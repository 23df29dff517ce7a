"""The agent SDK: agents, the gateway client, model providers and team topologies."""

__all__: list[str] = []
