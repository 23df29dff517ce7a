"""`conclave.toml`: where tools come from (docs/tools.md), validated at start-up.

```toml
[gateway]                  # any gateway setting; CONCLAVE_* environment variables override
port = 8321

[[source]]
name = "time"              # the tools' prefix: time__get_current_time
kind = "mcp_stdio"
command = ["mcp-server-time"]
pypi = ["mcp-server-time"]

[[source]]
name = "mine"
kind = "python"
path = "tools/my_tools.py" # a module name (`module`), a package directory or one .py file
requirements = ["humanize>=4"]
```

Every source has a `name` (its tools are served as `<name>__<tool>`, `<name>.<tool>` an alias;
`separator` changes the `__`, see `tools.sources.tool_names`), optional `allow`/`deny` globs on
the tools' own names, a default resource `intent`, and `network`: "none" (the default), or an
allow-list of "host:port" reached through the gateway's egress proxy. A file that does not
validate is refused with one line per problem, each naming the source and the field.
"""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    HttpUrl,
    ValidationError,
    field_validator,
    model_validator,
)

from protocol import PolicyRule, Principal, QuotaRule, ResourceIntent
from tools.sources.tool_names import (
    DEFAULT_SEPARATOR,
    SEPARATOR,
    check_served_name,
    dotted_tool_name,
    served_tool_name,
)

SOURCE_NAME = r"[a-z][a-z0-9_-]{0,31}"  # no dot: the dot separates the prefix from the tool
_HOST_PORT = re.compile(r"(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})")


class ConfigError(ValueError):
    """The configuration file is wrong; the message has one line per problem."""


class SourceBase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=rf"^{SOURCE_NAME}$")  # pydantic-core: $ is the very end
    separator: str = Field(default=DEFAULT_SEPARATOR, pattern=rf"^{SEPARATOR}$")
    allow: tuple[str, ...] = ()  # globs on the source's own tool names; empty: all
    deny: tuple[str, ...] = ()
    intent: ResourceIntent = ResourceIntent()  # for tools that declare none
    network: Literal["none"] | tuple[str, ...] = "none"

    @field_validator("network")
    @classmethod
    def _host_ports(cls, value: Any) -> Any:
        if isinstance(value, tuple):
            for entry in value:
                match = _HOST_PORT.fullmatch(entry)
                if match is None or not 0 < int(match.group(2)) < 65536:
                    raise ValueError(f"{entry!r} is not host:port")
        return value

    def serves(self, tool: str) -> bool:
        """Whether the allow/deny filters let the source's own tool `tool` through."""
        allowed = not self.allow or any(fnmatch.fnmatchcase(tool, g) for g in self.allow)
        return allowed and not any(fnmatch.fnmatchcase(tool, g) for g in self.deny)

    def qualified(self, tool: str) -> str:
        """The name the source's tool `tool` is served under; ToolNameError past 64."""
        served = served_tool_name(self.name, tool, self.separator)
        return check_served_name(served, self.name, tool)

    def aliases(self, tool: str) -> tuple[str, ...]:
        """The other names a call may use for `tool`: the dotted one, unless it is served."""
        dotted = dotted_tool_name(self.name, tool)
        return () if dotted == served_tool_name(self.name, tool, self.separator) else (dotted,)

    def visible_to(self, principal: Principal) -> bool:
        """Whether `principal`'s scopes cover the source as a whole (its resources and
        prompts go with its tools): `tool:<name>.*`, or the served spelling's glob."""
        return principal.may_call(f"{self.name}.*") or principal.may_call(
            f"{self.name}{self.separator}*"
        )


class PythonSource(SourceBase):
    """Python tool code: `module` (importable by name) or `path` (a package directory or a
    single .py file), with its own pip `requirements` (strings, or a requirements file)."""

    kind: Literal["python"]
    module: str | None = None
    path: Path | None = None
    requirements: tuple[str, ...] | Path = ()


class McpStdioSource(SourceBase):
    """An MCP server started inside the calling identity's sandbox, spoken to over stdio;
    `pypi` and `npm` packages are installed into its runtime when the image is built."""

    kind: Literal["mcp_stdio"]
    command: tuple[str, ...] = Field(min_length=1)
    env: dict[str, str] = {}
    pypi: tuple[str, ...] = ()
    npm: tuple[str, ...] = ()


class McpHttpSource(SourceBase):
    """A remote streamable-HTTP MCP server. The gateway holds its credential (from an
    environment variable or a secret file) and never passes an agent's token through."""

    kind: Literal["mcp_http"]
    url: HttpUrl
    credential_env: str | None = None
    credential_file: Path | None = None
    credential_header: str = "Authorization"  # sent as "Bearer <credential>" for this one
    sessions: int = Field(default=4, gt=0, le=64)  # the session pool's size
    # The wire a 2026-07-28 client's calls take to this server: "handshake" (its session; a
    # request it sends mid-call becomes the gateway's own round), or "2026-07-28" (the
    # revision's own: the server answers InputRequiredResult itself, relayed to the client).
    # A handshake-era client's calls always take the session.
    wire: Literal["handshake", "2026-07-28"] = "handshake"


ToolSource = Annotated[PythonSource | McpStdioSource | McpHttpSource, Field(discriminator="kind")]


class A2aAgentConfig(BaseModel):
    """An A2A agent served at `{gateway}/a2a/{name}` (`[[a2a_agent]]`): callers whose
    registration names it (`agents`, globs) reach it through the gateway's stages.

    With a `url` it is remote: as for an `mcp_http` source, the gateway holds the credential
    the agent wants (from an environment variable or a secret file) and never passes a
    caller's token on. Without one it is hosted: workers pull its tasks from the gateway
    (`agents.serve_a2a`), each authenticated as the agent `name` of `tenant` (no
    other identity may serve it); `description` is its card's, `lease_s` how long a worker
    holds a task without writing, and an `idempotent` agent's task whose worker went quiet
    is given to another worker (else it fails). A `confined` agent acts only with the task
    tokens its workers get with their tasks: its own token pulls tasks and nothing more."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=rf"^{SOURCE_NAME}$")
    url: HttpUrl | None = None  # a remote agent's base URL: its card is {url}/.well-known/...
    timeout_s: float = Field(default=300.0, gt=0, le=3600)  # one request, without a deadline
    credential_env: str | None = None
    credential_file: Path | None = None
    credential_header: str = "Authorization"  # sent as "Bearer <credential>"
    # A PEM public key: the agent's card must carry a JWS signature of it (A2A section 8.4),
    # else the gateway neither serves the card nor forwards to the agent.
    card_key_file: Path | None = None
    # A hosted agent's (no url):
    tenant: str | None = Field(default=None, min_length=1, max_length=64)
    description: str = Field(default="", max_length=2000)
    idempotent: bool = False
    lease_s: float = Field(default=15.0, gt=0, le=3600)
    confined: bool = False

    @model_validator(mode="after")
    def _remote_or_hosted(self) -> A2aAgentConfig:
        if (self.url is None) == (self.tenant is None):
            raise ValueError(
                "give a url (a remote agent) or a tenant (an agent its workers serve), not both"
            )
        hosted_only = (
            self.description
            or self.idempotent
            or self.confined
            or "lease_s" in self.model_fields_set
        )
        if self.url is not None and hosted_only:
            raise ValueError(
                "description, idempotent, lease_s and confined are for hosted agents (no url)"
            )
        return self

    @property
    def hosted(self) -> bool:
        return self.url is None


class ConclaveConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    gateway: dict[str, Any] = {}
    source: tuple[ToolSource, ...] = ()
    a2a_agent: tuple[A2aAgentConfig, ...] = ()
    policy: tuple[PolicyRule, ...] = ()  # docs/governance.md
    quota: tuple[QuotaRule, ...] = ()  # docs/governance.md


def load_config(path: Path) -> ConclaveConfig:
    """The validated file, or ConfigError with one line per problem naming the field."""
    try:
        raw = tomllib.loads(path.read_text("utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it ({exc.strerror})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not TOML: {exc}") from exc
    try:
        config = ConclaveConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError("\n".join(_line(path, raw, e) for e in exc.errors())) from exc
    for kind, names in (
        ("source", [s.name for s in config.source]),
        ("a2a_agent", [a.name for a in config.a2a_agent]),
    ):
        clashes = sorted({n for n in names if names.count(n) > 1})
        if clashes:
            raise ConfigError(f"{path}: {kind} names must be unique: {', '.join(clashes)}")
    for source in config.source:
        if isinstance(source, PythonSource) and (source.module is None) == (source.path is None):
            raise ConfigError(f"{path}: source {source.name!r}: give exactly one of module, path")
    return config


def _line(path: Path, raw: dict[str, Any], error: Any) -> str:
    where = list(error["loc"])
    label = ".".join(str(part) for part in where)
    if len(where) >= 2 and where[0] == "source" and isinstance(where[1], int):
        sources = raw.get("source") or []
        entry = sources[where[1]] if where[1] < len(sources) else {}
        name = entry.get("name", f"#{where[1] + 1}") if isinstance(entry, dict) else "?"
        # Past the index comes the discriminator's tag (the kind), then the field.
        field = [str(p) for p in where[2:] if p not in ("python", "mcp_stdio", "mcp_http")]
        label = f"source {name!r}: " + (".".join(field) or "(the table)")
    return f"{path}: {label}: {error['msg']}"
