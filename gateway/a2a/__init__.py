"""Agents calling agents (A2A 1.0) through the gateway: remote A2A agents declared in
conclave.toml (`[[a2a_agent]]`), served at `/a2a/{name}` with their cards rewritten to the
gateway's URLs (`agent_card`), every request through the six stages, forwarded by
`A2aForwarder` with the caller's tasks bound to it (`TaskOwners`), failures answered as A2A
names them with the SERF envelope beside (`a2a_errors`). Hosted agents (declared without a
url) are served by workers that pull their tasks (`hosted_work`): the tasks are owned state
in Redis with a lease and a fencing token (`HostedTasks`), answered to callers by
`HostedA2a`."""

from gateway.a2a.a2a_errors import rest_error, rpc_error
from gateway.a2a.a2a_methods import (
    A2aRequest,
    check_rpc_content_type,
    check_version,
    rest_request,
    rpc_request,
)
from gateway.a2a.agent_card import agent_path, gateway_card
from gateway.a2a.card_signature import CardKeyError, CardSigner, verified
from gateway.a2a.forwarding import A2aCall, A2aForwarder
from gateway.a2a.hosted_agents import HostedAgent, HostedAgents
from gateway.a2a.hosted_serving import HostedA2a
from gateway.a2a.hosted_tasks import HostedTasks
from gateway.a2a.hosted_work import check_worker, next_work, post_update, task_token_ttl_s
from gateway.a2a.live_tasks import LiveTasks
from gateway.a2a.remote_agents import CARD_TTL_S, HTTP_JSON, JSONRPC, RemoteAgent, RemoteAgents
from gateway.a2a.task_owners import TaskOwners

__all__ = [
    "CARD_TTL_S",
    "HTTP_JSON",
    "JSONRPC",
    "A2aCall",
    "A2aForwarder",
    "A2aRequest",
    "CardKeyError",
    "CardSigner",
    "HostedA2a",
    "HostedAgent",
    "HostedAgents",
    "HostedTasks",
    "LiveTasks",
    "RemoteAgent",
    "RemoteAgents",
    "TaskOwners",
    "agent_path",
    "check_rpc_content_type",
    "check_version",
    "check_worker",
    "gateway_card",
    "next_work",
    "post_update",
    "rest_error",
    "rest_request",
    "rpc_error",
    "rpc_request",
    "task_token_ttl_s",
    "verified",
]
