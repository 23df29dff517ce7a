"""AgentDojo's task-suite functions as Conclave tools, run inside the sandbox.

Every function of every suite of AgentDojo benchmark `BENCHMARK_VERSION` becomes the tool
`<suite>.<function>` (e.g. `banking.send_money`), with AgentDojo's own argument schema plus
one more argument, `environment`.

Where a task's environment lives: in the Conclave store, not in the sandbox. A sandbox has no
network and may be recycled at any time (after N calls, or any kill), so nothing in it may
outlive a call. Each call therefore carries the environment in (the JSON of the suite's
environment model), the function runs on it in the sandbox, and the call returns the changed
environment with the result; the agent side commits it back to the store with the version it
read, so a task's environment has a history and concurrent writers cannot lose updates.

`restore` rebuilds an environment from that JSON faithfully: AgentDojo's models rebuild some
fields from `initial_*` lists in validators (calendar events, inbox, files), which would undo
every change a function made; restore sets those fields back from the data.

Add `tools.harness.agentdojo_suites` to `CONCLAVE_TOOL_MODULES` to serve these (needs the
`agentdojo` package, `pip install 'conclave[tasks]'`; importing it takes a few seconds).
"""

from __future__ import annotations

from typing import Any, TypeVar

from agentdojo.agent_pipeline.tool_execution import tool_result_to_str
from agentdojo.functions_runtime import Function, FunctionsRuntime, TaskEnvironment
from agentdojo.task_suite.load_suites import get_suites
from pydantic import BaseModel, ConfigDict, TypeAdapter, create_model

from protocol import ResourceIntent, ToolSpec
from tools.registry import RegisteredTool, default_registry

BENCHMARK_VERSION = "v1.2.2"
# Importing agentdojo makes the runner's address space large; the limit counts from there.
INTENT = ResourceIntent(memory_mb=512, cpu_seconds=10, timeout_ms=30_000)
M = TypeVar("M", bound=BaseModel)


def restore(model_type: type[M], data: dict[str, Any]) -> M:
    """The model `data` was dumped from, with fields that validators rebuild set back."""
    model = model_type.model_validate(data)
    _set_back(model, data)
    return model


def _set_back(model: BaseModel, data: dict[str, Any]) -> None:
    for name, field in type(model).model_fields.items():
        if name not in data:
            continue
        value = getattr(model, name)
        if isinstance(value, BaseModel) and isinstance(data[name], dict):
            _set_back(value, data[name])
            continue
        annotation: Any = field.annotation
        wanted = TypeAdapter(annotation).validate_python(data[name])
        if wanted != value:
            setattr(model, name, wanted)


def tool_name(suite: str, function: str) -> str:
    return f"{suite}.{function}"


def _entry_name(suite: str, function: str) -> str:
    return f"{suite}__{function}"


def _make_tool(suite: str, env_type: type[TaskEnvironment], function: Function) -> RegisteredTool:
    runtime = FunctionsRuntime([function])

    def call(environment: dict[str, Any], **arguments: Any) -> dict[str, Any]:
        env = restore(env_type, environment)
        result, error = runtime.run_function(env, function.name, arguments)
        return {
            "result": tool_result_to_str(result) if error is None else "",
            "error": error,
            "environment": env.model_dump(mode="json"),
        }

    attribute = _entry_name(suite, function.name)
    call.__name__ = call.__qualname__ = attribute
    globals()[attribute] = call  # the runner imports the entrypoint by name
    arguments_model = create_model(
        f"{attribute}_arguments",
        __base__=function.parameters,
        environment=(dict[str, Any], ...),
    )
    arguments_model.model_config = ConfigDict(extra="forbid")
    schema = arguments_model.model_json_schema()
    schema.pop("title", None)
    spec = ToolSpec(
        name=tool_name(suite, function.name),
        description=function.description,
        input_schema=schema,
        intent=INTENT,
    )
    return RegisteredTool(spec, call, arguments_model, None, f"{__name__}:{attribute}")


def _register_all() -> None:
    for suite_name, suite in get_suites(BENCHMARK_VERSION).items():
        for function in suite.tools:
            default_registry.add(_make_tool(suite_name, suite.environment_type, function))


_register_all()
