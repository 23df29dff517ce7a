"""A declared tool built for serving: a typed Python function becomes a `ToolSpec` and a callable
the sandbox can run (`@tool` itself, standard library only, is `tools.tool_declaration`).

The input JSON Schema comes from the signature (through pydantic), the description from the
docstring. A parameter annotated `ToolContext` is not part of the schema: the gateway's
context is injected there, never taken from the arguments. The output schema comes from the
return annotation, as FastMCP builds it: an object type (a mapping, a model) is the schema of
the tool's `structuredContent`; any other type is wrapped as `{"result": ...}`; a tool that
returns content blocks (`tools.Image`...) has none. The MCP annotations (read-only,
destructive, idempotent, open-world) come from what `@tool` declares: open-world by default
exactly when the tool has network rights, destructive by default unless read-only.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, get_args, get_origin, get_type_hints

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError, create_model

from protocol import (
    AudioContent,
    EmbeddedResource,
    ErrorCode,
    ImageContent,
    Principal,
    ResourceIntent,
    ResourceLink,
    SerfError,
    TextContent,
    ToolAnnotations,
    ToolContext,
    ToolSpec,
)
from tools.calls import IN_SANDBOX, Placement
from tools.tool_declaration import DECLARED, ToolDeclaration, tool
from tools.tool_result import ToolResult, result_of

__all__ = [
    "DuplicateToolError",
    "FunctionSchema",
    "RegisteredTool",
    "ToolArgumentsError",
    "ToolRegistry",
    "build_tool",
    "default_registry",
    "describe_function",
    "output_schema_of",
    "tool",
    "validate_arguments",
]


class ToolArgumentsError(ValueError):
    """Arguments that do not fit a tool's schema; `hints` maps each field to what is wrong."""

    def __init__(self, tool: str, hints: dict[str, str]) -> None:
        super().__init__(f"the arguments do not fit {tool}'s schema; see param_hints")
        self.tool = tool
        self.hints = hints

    def as_serf(self) -> SerfError:
        """The caller's envelope: INVALID_ARGUMENTS with a hint per field."""
        return SerfError.of(ErrorCode.INVALID_ARGUMENTS, str(self), param_hints=self.hints)


class DuplicateToolError(ValueError):
    pass


def validate_arguments(
    tool: str, model: type[BaseModel], arguments: dict[str, Any]
) -> dict[str, Any]:
    """`arguments` checked against `model` and coerced, or `ToolArgumentsError` with hints."""
    try:
        validated = model.model_validate(arguments)
    except ValidationError as exc:
        hints = {
            ".".join(str(p) for p in err["loc"]) or "(arguments)": err["msg"]
            for err in exc.errors()
        }
        raise ToolArgumentsError(tool, hints) from exc
    return {k: getattr(validated, k) for k in type(validated).model_fields}


@dataclass(frozen=True)
class FunctionSchema:
    """What a typed function's signature and docstring say about it as a tool."""

    name: str
    description: str
    input_schema: dict[str, Any]  # JSON Schema of the arguments
    arguments_model: type[BaseModel]  # the pydantic model that schema comes from
    context_param: str | None  # the parameter annotated `ToolContext`, not in the schema
    # JSON Schema of the structured result (None: content blocks only), and whether it wraps
    # the returned value as {"result": value}
    output_schema: dict[str, Any] | None = None
    wraps_result: bool = True


_BLOCK_MODELS = (TextContent, ImageContent, AudioContent, EmbeddedResource, ResourceLink)


def _returns_blocks(annotation: Any) -> bool:
    """The annotation is a content block, a union of them, or a list of them."""
    if isinstance(annotation, type):
        return issubclass(annotation, _BLOCK_MODELS)
    args = get_args(annotation)
    if get_origin(annotation) in (list, tuple) or args:
        return bool(args) and all(_returns_blocks(a) for a in args if a is not Ellipsis)
    return False


def output_schema_of(annotation: Any) -> tuple[dict[str, Any] | None, bool]:
    """The output schema for a return annotation, and whether it wraps the value."""
    if _returns_blocks(annotation):
        return None, False
    try:
        schema = TypeAdapter(annotation).json_schema()
    except Exception:  # a type pydantic cannot describe: any value
        schema = {}
    if schema.get("type") == "object":
        return schema, False
    wrapped = {"type": "object", "properties": {"result": schema}, "required": ["result"]}
    return wrapped, True


def describe_function(
    function: Callable[..., Any], *, name: str | None = None, description: str | None = None
) -> FunctionSchema:
    """The schema of `function`'s arguments (from its signature, through pydantic) and its
    description (the docstring): what `@tool` and the SDK's `@local_tool` both build on."""
    hints = get_type_hints(function)
    fields: dict[str, Any] = {}
    context_param: str | None = None
    for param in inspect.signature(function).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"tool {function.__name__}: *args/**kwargs cannot be described")
        annotation = hints.get(param.name, Any)
        if annotation is ToolContext or annotation == ToolContext | None:
            context_param = param.name
            continue
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (annotation, default)
    tool_name = name or function.__name__
    model = create_model(f"{tool_name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
    schema = model.model_json_schema()
    schema.pop("title", None)
    text = description or inspect.cleandoc(function.__doc__ or "")
    output, wraps = output_schema_of(hints.get("return", Any))
    return FunctionSchema(tool_name, text, schema, model, context_param, output, wraps)


@dataclass(frozen=True)
class RegisteredTool:
    spec: ToolSpec
    function: Callable[..., Any]
    arguments_model: type[BaseModel]
    context_param: str | None
    entrypoint: str  # "module:function", what the sandbox runner imports
    # The "host:port" destinations the tool may reach through the gateway's egress proxy;
    # empty: no network at all (gateway.egress checks each connection against it).
    network: tuple[str, ...] = ()
    # Declared by the tool: a trivial, pure, synchronous function (microseconds, no I/O, no
    # blocking), so an in-process executor may call it on the event loop, not in a thread.
    cheap: bool = False
    # Other names a call may use for it (a source's dotted `<source>.<tool>`): found by
    # `ToolRegistry.get`, matched by scopes, never listed.
    aliases: tuple[str, ...] = ()
    # Its schema wraps a returned value as {"result": value} (see `output_schema_of`).
    wraps_result: bool = True
    # Where it runs: set where its kind registers (an MCP source's discovery), never parsed.
    placement: Placement = IN_SANDBOX

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def names(self) -> tuple[str, ...]:
        return (self.spec.name, *self.aliases)

    def callable_by(self, principal: Principal) -> bool:
        """Whether a `tool:<glob>` scope of `principal` covers one of the tool's names."""
        return any(principal.may_call(name) for name in self.names)

    def result_of(self, value: Any) -> ToolResult:
        """What the tool returned, as MCP content."""
        return result_of(value, wraps=self.wraps_result)

    def output_of(self, value: Any) -> dict[str, Any]:
        """What the tool returned, as the plain JSON the sandbox runner carries."""
        return self.result_of(value).to_wire()

    def validate(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Check arguments against the schema; return them coerced, or raise with hints.

        The one check of a call's arguments: `invoke` runs it where the tool runs (the
        sandbox's runner, or the in-process executor), so it runs once per call."""
        return validate_arguments(self.name, self.arguments_model, arguments)

    def invoke(self, arguments: dict[str, Any], context: ToolContext | None = None) -> Any:
        """Validate and call. Async tools return a coroutine for the caller to await."""
        kwargs = self.validate(arguments)
        if self.context_param is not None:
            kwargs[self.context_param] = context
        return self.function(**kwargs)


@dataclass
class ToolRegistry:
    _tools: dict[str, RegisteredTool] = field(default_factory=dict)
    _aliases: dict[str, str] = field(default_factory=dict)  # alias -> served name
    # `@tool`'s declarations this registry serves, built when it is first asked (the
    # default registry's: `tools.tool_declaration.DECLARED`), and how many it has built.
    declarations: list[ToolDeclaration] | None = None
    _built: int = 0

    def _build_declared(self) -> None:
        """Build and add the declarations made since the last look (a length check)."""
        declared = self.declarations
        while declared is not None and self._built < len(declared):
            self._built += 1
            self._add(declared[self._built - 1].registered)

    def add(self, tool: RegisteredTool) -> None:
        """Serve `tool` (again, for the same entrypoint); DuplicateToolError, one line naming
        both, when one of its names is another tool's name or alias."""
        self._build_declared()
        self._add(tool)

    def _add(self, tool: RegisteredTool) -> None:
        for name in tool.names:
            existing = self.get(name)
            if existing is not None and existing.entrypoint != tool.entrypoint:
                raise DuplicateToolError(
                    f"tool name {name!r} is claimed twice: by {_described(existing)} and by"
                    f" {_described(tool)}; rename one (@tool(name=...), a source's name or"
                    " its `separator` in conclave.toml)"
                )
        self._tools[tool.name] = tool
        for alias in tool.aliases:
            self._aliases[alias] = tool.name

    def get(self, name: str) -> RegisteredTool | None:
        """The tool served as `name`, or under the alias `name`."""
        if self.declarations is not None and self._built < len(self.declarations):
            self._build_declared()
        found = self._tools.get(name)
        if found is None and (served := self._aliases.get(name)) is not None:
            found = self._tools.get(served)
        return found

    def remove(self, name: str) -> None:
        """Stop serving `name` (a remote source's tool, when the gateway that found it stops)."""
        self._build_declared()
        removed = self._tools.pop(name, None)
        for alias in removed.aliases if removed is not None else ():
            self._aliases.pop(alias, None)

    def __iter__(self) -> Iterator[RegisteredTool]:
        self._build_declared()
        return iter(sorted(self._tools.values(), key=lambda t: t.name))

    def __len__(self) -> int:
        self._build_declared()
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        self._build_declared()
        return name in self._tools or name in self._aliases


def _described(tool: RegisteredTool) -> str:
    """A tool as its author knows it: its dotted source name (or name) and its code."""
    known = tool.aliases[0] if tool.aliases else tool.name
    return f"{known} ({tool.entrypoint})"


# Tools defined with @tool land here unless a registry is given.
default_registry = ToolRegistry(declarations=DECLARED)


def build_tool(
    function: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    intent: ResourceIntent | Mapping[str, float] | None = None,
    idempotent: bool = False,
    network: tuple[str, ...] = (),
    cheap: bool = False,
    title: str | None = None,
    read_only: bool = False,
    destructive: bool | None = None,
    open_world: bool | None = None,
) -> RegisteredTool:
    """The served tool `function` is, as `@tool`'s keywords describe it (`intent`: a
    `ResourceIntent` or its fields)."""
    if intent is not None and not isinstance(intent, ResourceIntent):
        intent = ResourceIntent.model_validate(intent)
    described = describe_function(function, name=name, description=description)
    annotations = ToolAnnotations(
        title=title,
        readOnlyHint=read_only,
        destructiveHint=(not read_only) if destructive is None else destructive,
        idempotentHint=idempotent,
        openWorldHint=bool(network) if open_world is None else open_world,
    )
    spec = ToolSpec(
        name=described.name,
        title=title,
        description=described.description,
        input_schema=described.input_schema,
        output_schema=described.output_schema,
        intent=intent or ResourceIntent(),
        idempotent=idempotent,
        annotations=annotations,
    )
    entrypoint = f"{function.__module__}:{function.__qualname__}"
    return RegisteredTool(
        spec,
        function,
        described.arguments_model,
        described.context_param,
        entrypoint,
        tuple(network),
        cheap=cheap,
        wraps_result=described.wraps_result,
    )
