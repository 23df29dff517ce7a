"""`@tool` and what it declares: standard library only, so a sandbox's runner imports tool
modules without pydantic (DESIGN.md, "Sandboxes": a start costs tens of milliseconds).

`@tool` records a `ToolDeclaration` (the function and the decorator's keywords). The served
tool, its schemas and its pydantic model, is built from it by `tools.registry` when the
gateway (or anything holding the default registry) first asks: the one place arguments are
described and validated.

In the sandbox a declared tool is called through `call_tool`. A signature of plain types
(`str`, `int`, `float`, `bool`, `Any`, or one of them or None) whose arguments already are
those exact types is called as it is: pydantic would hand the same values back. Anything else
(a coercion, a missing or extra field, a model, a `ToolContext`) goes to the built tool, so
the answer, a refusal with its hints included, is pydantic's. `warm_tool` builds what a tool's
calls will need in the runner, before it forks their children, so they inherit it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import inspect  # loaded by dataclasses anyway
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, overload

from tools.tool_result import result_of

if TYPE_CHECKING:
    from protocol import ResourceIntent

# The built tool is `tools.registry.RegisteredTool`, named here by what it does only: the
# registry imports this module, and this one reaches it at run time (`registered`) alone.
BuiltTool = Any


class AcceptsTools(Protocol):
    """What `@tool(registry=...)` adds a built tool to (`tools.registry.ToolRegistry`)."""

    def add(self, tool: BuiltTool, /) -> None: ...


F = TypeVar("F", bound=Callable[..., Any])

_PLAIN_TYPES: frozenset[Any] = frozenset({str, int, float, bool})
# Defaults pydantic hands back as they are, as a plain call does.
_IMMUTABLE = (str, int, float, bool, type(None))
_NONE = type(None)


@dataclass(frozen=True)
class _PlainCall:
    """A signature whose arguments the standard library can accept as pydantic would."""

    types: dict[str, frozenset[type] | None]  # the exact types each accepts (None: any)
    required: frozenset[str]
    defaults: dict[str, Any]

    def accept(self, arguments: Any) -> dict[str, Any] | None:
        """The call's keyword arguments, or None when pydantic must decide."""
        if not isinstance(arguments, dict):
            return None
        names = arguments.keys()
        if not (self.required <= names and names <= self.types.keys()):
            return None
        for name, value in arguments.items():
            allowed = self.types[name]
            if allowed is not None and type(value) not in allowed:
                return None
        return {**self.defaults, **arguments}


@dataclass(frozen=True, eq=False)
class ToolDeclaration:
    """What `@tool` was given: the function and its keywords (`tools.registry.build_tool`'s)."""

    function: Callable[..., Any]
    options: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.options.get("name") or self.function.__name__)

    @property
    def entrypoint(self) -> str:
        """ "module:function", what the sandbox runner imports."""
        return f"{self.function.__module__}:{self.function.__qualname__}"

    @cached_property
    def registered(self) -> BuiltTool:
        """The served tool, built once (through pydantic) by `tools.registry`."""
        return importlib.import_module("tools.registry").build_tool(self.function, **self.options)

    @cached_property
    def _hints(self) -> dict[str, Any] | None:
        try:
            return typing.get_type_hints(self.function)
        except Exception:  # a name only the type checker sees: pydantic's to describe
            return None

    @cached_property
    def plain_call(self) -> _PlainCall | None:
        """The signature as plain types, or None when only pydantic can check it."""
        hints = self._hints
        if hints is None:
            return None
        types: dict[str, frozenset[type] | None] = {}
        required: set[str] = set()
        defaults: dict[str, Any] = {}
        for param in inspect.signature(self.function).parameters.values():
            if param.kind not in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
                return None
            accepted = _plain_types(hints.get(param.name, Any))
            if accepted is False:
                return None
            types[param.name] = accepted if accepted is not True else None
            if param.default is param.empty:
                required.add(param.name)
            elif isinstance(param.default, _IMMUTABLE):
                defaults[param.name] = param.default
            else:  # pydantic copies a mutable default; leave it to pydantic
                return None
        return _PlainCall(types, frozenset(required), defaults)

    @cached_property
    def plain_wraps(self) -> bool | None:
        """Whether the output schema wraps the value as {"result": ...}, where the standard
        library can tell it as `tools.registry.output_schema_of` does; else None."""
        hints = self._hints
        return None if hints is None else _wraps(hints.get("return", Any))

    def invoke(
        self,
        arguments: dict[str, Any],
        context: Mapping[str, Any] | None = None,
        report: Callable[[Any], None] | None = None,
    ) -> Any:
        """Call the tool: plain arguments directly, the rest through the built tool."""
        plain = self.plain_call
        kwargs = plain.accept(arguments) if plain is not None else None
        if kwargs is not None:
            return self.function(**kwargs)
        return _invoke_built(self.registered, arguments, context, report)

    def output_of(self, value: Any) -> dict[str, Any]:
        """What the tool returned, as the plain JSON the runner carries."""
        wraps = self.plain_wraps
        if wraps is None:
            wraps = self.registered.wraps_result
        return result_of(value, wraps=wraps).to_wire()


def _plain_types(hint: Any) -> frozenset[type] | bool:
    """The exact types a plain annotation accepts as they are; True: anything; False: not plain."""
    if hint is Any:
        return True
    if hint in _PLAIN_TYPES:
        return frozenset({hint})
    args = typing.get_args(hint)
    if args and _is_union(hint) and all(a in _PLAIN_TYPES or a is _NONE for a in args):
        return frozenset(args)
    return False


def _is_union(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType)


def _wraps(hint: Any) -> bool | None:
    """`output_schema_of`'s answer for the annotations the standard library can read."""
    if hint is Any or hint is None or hint is _NONE or hint in _PLAIN_TYPES:
        return True
    origin = typing.get_origin(hint) or hint
    if origin in (list, tuple):
        args = typing.get_args(hint)
        return True if all(a in _PLAIN_TYPES or a is Any or a is ... for a in args) else None
    if origin is dict:  # an object schema: its own structured content
        return False
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return False
    return None  # a TypedDict among them: pydantic reads typing's only from Python 3.12


def _invoke_built(
    registered: Any,
    arguments: dict[str, Any],
    context: Mapping[str, Any] | None,
    report: Callable[[Any], None] | None,
) -> Any:
    """Call a built tool, its `ToolContext` made from the call's context when it takes one."""
    tool_context = None
    if registered.context_param is not None and context is not None:
        from protocol import ToolContext

        tool_context = ToolContext.model_validate(context)
        if report is not None:  # progress and logs, to the runner
            tool_context = tool_context.reporting_to(report)
    return registered.invoke(arguments, tool_context)


def call_tool(
    target: ToolDeclaration | BuiltTool,
    arguments: dict[str, Any],
    context: Mapping[str, Any] | None,
    report: Callable[[Any], None] | None,
) -> Any:
    """Call a declared or built tool with a call's arguments and its context as sent."""
    if isinstance(target, ToolDeclaration):
        return target.invoke(arguments, context, report)
    return _invoke_built(target, arguments, context, report)


def warm_tool(target: ToolDeclaration | BuiltTool) -> None:
    """Build, in the runner, what calls of `target` need beyond the standard library (its
    pydantic model, `ToolContext`): the children forked after it inherit them."""
    if isinstance(target, ToolDeclaration):
        if target.plain_call is not None and target.plain_wraps is not None:
            return
        target = target.registered
    if target.context_param is not None:
        importlib.import_module("protocol")


# Declared for the default registry, in order: `tools.registry` builds them when asked.
DECLARED: list[ToolDeclaration] = []


def declared_at(entrypoint: str) -> ToolDeclaration | None:
    """The declaration of the function `entrypoint` names, the last one if declared twice."""
    for declaration in reversed(DECLARED):
        if declaration.entrypoint == entrypoint:
            return declaration
    return None


_declaring: list[list[ToolDeclaration]] = [DECLARED]  # where `@tool` files, the last first


def declare(function: Callable[..., Any], **options: Any) -> ToolDeclaration:
    """Declare `function` a tool of the default registry (or of `declaring_into`'s list)."""
    declaration = ToolDeclaration(function, options)
    _declaring[-1].append(declaration)
    return declaration


@contextlib.contextmanager
def declaring_into(declared: list[ToolDeclaration]) -> Iterator[list[ToolDeclaration]]:
    """While inside, `@tool` declares into `declared`, not the default registry's list (a
    tool source's module, imported with a registry of its own)."""
    _declaring.append(declared)
    try:
        yield declared
    finally:
        _declaring.remove(declared)


@overload
def tool(function: F, /) -> F: ...
@overload
def tool(
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
    registry: AcceptsTools | None = None,
) -> Callable[[F], F]: ...
def tool(
    function: F | None = None,
    /,
    *,
    registry: AcceptsTools | None = None,
    **options: Any,
) -> F | Callable[[F], F]:
    """Register a typed function as a tool; the function itself is returned unchanged.

    `network` lists the "host:port" destinations the tool may reach (through the gateway's
    egress proxy); by default it has no network. `cheap` declares a trivial, pure, synchronous
    function that an in-process executor may call on its event loop. `title`, `read_only`,
    `destructive` (default: not read-only), `idempotent` and `open_world` (default: it has
    network rights) are what `tools/list` tells clients about it. `intent` is a
    `ResourceIntent` or its fields as a mapping.

    Without `registry`, the tool joins the default registry, which builds it (schemas and
    all) when first asked; with one, it is built and added at once."""

    def register(fn: F) -> F:
        if registry is None:
            declare(fn, **options)
        else:
            build_tool = importlib.import_module("tools.registry").build_tool
            registry.add(build_tool(fn, **options))
        return fn

    return register(function) if function is not None else register
