"""Every fenced code block of README.md and of the docs site (`docs/*.md`), checked against a
real stack.

The stack is `EmbeddedStack` (the gateway under uvicorn in its own process, real Redis, the
docker sandbox backend). A block runs the way a reader runs it:

- `python`: saved to a file in a fresh directory and run by this interpreter in a subprocess,
  with `CONCLAVE_URL` and `CONCLAVE_ADMIN_KEY` of the test's stack in its environment (the two
  variables the README tells the reader to export);
- `bash`/`sh`: run by `bash -euo pipefail` in a fresh directory with the same environment;
- `toml`: loaded with `tools.sources.load_config`, as `conclave serve --config` loads it;
- `haproxy`: a load balancer's configuration, checked by `haproxy -c` as HAProxy reads it;
- `json`: an MCP host's configuration: it parses, and every URL in it is a gateway's `/mcp`.

HTML comments on the lines just before a fence change that (`<!-- readme: KIND ... -->`, one
per line, in any order; `<!-- example: NAME -->` lines of other tests may sit among them). A
block without a `readme:` comment runs as above.

- `expect TEXT`: the block runs and its standard output contains TEXT (one comment a text).
- `skip, REASON`: not run; for the architecture diagram only (the README's, and its copy on
  the concepts page).
- `foreground`: a server command: started in the repository (on a free port), it must print
  its URL, and Ctrl-C (SIGINT) must stop it cleanly.
- `env`: exports exactly the variables given to every block; run with a data directory
  holding the stack's admin key, it must yield the stack's default URL and that key.
- `ci`: commands that run this test (running them here would recurse): each is a line of
  `.ci/run` or `bash .ci/NAME` for an existing script (a command quoted in its comment
  must be in that script), and `.ci/run` calls the README's test command `bash .ci/test`.
- `tested-by PATH`: a worked example that the test at PATH runs as written (it reads the
  block by its `<!-- example: NAME -->` comment); `toml` ones are also loaded here.
- `output-of COMMAND`: sample output; its header row must be the columns COMMAND prints.

A failing block fails its own test case, named `<file>:<line of its fence>`.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conclave.bench import SUITES
from conclave.stack import EmbeddedStack
from gateway import Settings
from tools.sources import load_config

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
KINDS = {"expect", "skip", "foreground", "env", "ci", "tested-by", "output-of"}
ADMIN_KEY = "readme-admin-key"
BENCH_SUMMARY_COLUMNS = ["suite", "goal", "target", "measured", "met"]
# The blocks take the module's stack by getfixturevalue: the tiers group them by this mark.
pytestmark = pytest.mark.system


@dataclass
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    language: str
    text: str
    markers: list[tuple[str, str]] = field(default_factory=list)  # (kind, argument)
    example: str | None = None  # the name in an `<!-- example: NAME -->` comment

    def marked(self, kind: str) -> list[str]:
        return [argument for k, argument in self.markers if k == kind]

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def page_blocks(page: Path) -> list[Block]:
    """The fenced blocks of one page with the comments just above each."""
    lines = page.read_text().splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        opening = re.fullmatch(r"```(\w*)\s*", lines[index])
        if opening is None:
            index += 1
            continue
        end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
        text = "\n".join(lines[index + 1 : end]) + "\n"
        block = Block(page, index + 1, opening.group(1), text)
        above = index - 1
        while above >= 0 and (comment := re.fullmatch(r"<!-- (\S+):? (.*?) -->", lines[above])):
            if comment.group(1) == "example:":
                block.example = comment.group(2)
            elif comment.group(1) == "readme:":
                kind, _, argument = comment.group(2).partition(" ")
                block.markers.insert(0, (kind.rstrip(","), argument.strip()))
            above -= 1
        blocks.append(block)
        index = end + 1
    return blocks


BLOCKS = [block for page in PAGES for block in page_blocks(page)]


@pytest.fixture(scope="module")
def stack(redis_url: str, docker_engine: str) -> Iterator[EmbeddedStack]:
    settings = Settings(
        redis_url=redis_url,
        port=0,
        sandbox_backend="docker",
        docker_host=docker_engine,
        secret="readme-secret-" + "r" * 32,
        admin_key=ADMIN_KEY,
    )
    with EmbeddedStack(settings) as running:
        yield running


def reader_env(**extra: str) -> dict[str, str]:
    """A reader's shell: the venv first on PATH, no CONCLAVE_* besides what the README sets."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONCLAVE_")}
    env["PATH"] = os.pathsep.join([str(ROOT / ".venv" / "bin"), env.get("PATH", "")])
    env["CONCLAVE_DATA_DIR"] = os.environ["CONCLAVE_DATA_DIR"]  # the test run's, not the user's
    return env | extra


def run_block(block: Block, stack: EmbeddedStack, cwd: Path) -> str:
    """Run a python or bash block as a reader would; its standard output."""
    env = reader_env(CONCLAVE_URL=stack.url, CONCLAVE_ADMIN_KEY=ADMIN_KEY)
    if block.language == "python":
        script = cwd / f"{block.page.stem}_{block.line}.py"
        script.write_text(block.text)
        command = [sys.executable, str(script)]
    else:
        command = ["bash", "-euo", "pipefail", "-c", block.text]
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (
        f"{block.where}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    )
    for text in block.marked("expect"):
        assert text in done.stdout, f"{block.where}: {text!r} not printed:\n{done.stdout}"
    return done.stdout


def check_foreground(block: Block, cwd: Path) -> None:
    """Start the server command, wait for its URL, stop it with Ctrl-C."""
    # 8321 may be taken on a shared machine; and a data directory of its own: the test run's
    # is shared by every xdist worker, and two servers at once cannot share its Redis.
    env = reader_env(CONCLAVE_PORT="0", CONCLAVE_DATA_DIR=str(cwd / "data"))
    server = subprocess.Popen(
        ["bash", "-c", block.text],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    assert server.stdout is not None
    output = b""
    deadline = time.monotonic() + 180
    try:
        while b"Ctrl-C stops it" not in output and time.monotonic() < deadline:
            if server.poll() is not None:
                output += server.stdout.read()
                break
            if select.select([server.stdout], [], [], 0.5)[0]:
                output += os.read(server.stdout.fileno(), 65536)
        assert re.search(rb"Conclave gateway http://127\.0\.0\.1:\d+", output), (
            f"{block.where}: no URL printed:\n{output.decode()}"
        )
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGINT)
        try:
            rest, _ = server.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            stuck = _conclave_processes()  # before the kill: what did not stop, and where
            os.killpg(server.pid, signal.SIGKILL)
            rest, _ = server.communicate()
            raise AssertionError(
                f"{block.where}: still running 60 s after Ctrl-C:\n{stuck}\n{rest.decode()}"
            ) from None
    assert server.returncode == 0, f"{block.where}: exit {server.returncode}\n{rest.decode()}"
    assert b"stopped." in rest, f"{block.where}: {rest.decode()}"


def _conclave_processes() -> str:
    """This machine's Conclave and Redis processes: state, kernel wait channel, age."""
    ps = ["ps", "-eo", "pid,ppid,sid,stat,wchan:24,etimes,args", "--forest"]
    table = subprocess.run(ps, capture_output=True, text=True, check=False).stdout
    return "\n".join(line for line in table.splitlines() if "conclave" in line or "redis" in line)


def check_env(block: Block, tmp_path: Path) -> None:
    """The exports name exactly our variables and yield the default URL and the data key."""
    exported = set(re.findall(r"^export (\w+)=", block.text, re.M))
    assert exported == {"CONCLAVE_URL", "CONCLAVE_ADMIN_KEY"}, f"{block.where}: {exported}"
    (tmp_path / "conclave").mkdir()
    (tmp_path / "conclave" / "admin_key").write_text(ADMIN_KEY + "\n")
    show = block.text + 'echo "$CONCLAVE_URL $CONCLAVE_ADMIN_KEY"\n'
    env = reader_env(XDG_DATA_HOME=str(tmp_path))
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", show], env=env, capture_output=True)
    defaults = Settings.model_fields
    url = f"http://{defaults['host'].default}:{defaults['port'].default}"
    assert done.stdout.decode().split() == [url, ADMIN_KEY], f"{block.where}: {done}"


def check_ci(block: Block) -> None:
    """Each command is what CI runs: a line of .ci/run or an existing .ci script."""
    ci_run = (ROOT / ".ci" / "run").read_text().splitlines()
    assert any(line.startswith("bash .ci/test") for line in ci_run), ".ci/run skips the tests"
    for line in block.text.splitlines():
        command, _, comment = line.partition("#")
        for part in filter(None, (p.strip() for p in command.split("&&"))):
            script = re.fullmatch(r"bash (\.ci/\w+)", part)
            if script is None:
                assert any(ci.startswith(part) for ci in ci_run), f"{block.where}: {part!r}"
                continue
            body = (ROOT / script.group(1)).read_text()  # the script exists
            for quoted in re.findall(r"`([^`]+)`", comment):
                assert quoted in body, f"{block.where}: {script.group(1)} never runs {quoted!r}"


def check_tested_by(block: Block, tmp_path: Path) -> None:
    """Another test runs this example by its name; toml examples load here too."""
    (path,) = block.marked("tested-by")
    assert block.example is not None, f"{block.where}: tested-by without an example: name"
    test = (ROOT / path).read_text()
    page = str(block.page.relative_to(ROOT))
    assert page in test and "<!-- example: " in test, f"{block.where}: {path} reads {page}?"
    if block.language == "toml":
        for other in BLOCKS:  # the example's sibling files, where its paths point
            if other.page == block.page and other.marked("tested-by") == [path] and other.example:
                (tmp_path / other.example).write_text(other.text)
        load_config(tmp_path / block.example)


def check_haproxy(block: Block, tmp_path: Path) -> None:
    """HAProxy accepts the configuration as written."""
    haproxy = shutil.which("haproxy")
    assert haproxy, "haproxy is missing: apt-get install haproxy (.ci installs it)"
    config = _write(tmp_path / "haproxy.cfg", block.text)
    done = subprocess.run([haproxy, "-c", "-f", str(config)], capture_output=True, text=True)
    assert done.returncode == 0, f"{block.where}: {done.stdout}{done.stderr}"


def check_json(block: Block) -> None:
    """An MCP host's configuration: valid JSON whose every URL (a `url`, or an argument of a
    bridge command such as `mcp-remote`) is a gateway's `/mcp`."""
    config = json.loads(block.text)
    urls = re.findall(r'"(https?://[^"]+)"', json.dumps(config))
    assert urls and all(url.endswith("/mcp") for url in urls), f"{block.where}: {urls}"


def check_output_of(block: Block) -> None:
    """Sample output of `conclave bench`: its summary's columns and suite names."""
    (command,) = block.marked("output-of")
    assert command == "conclave bench", f"{block.where}: no check for {command!r}"
    header, *rows = block.text.splitlines()
    assert header.split() == BENCH_SUMMARY_COLUMNS, f"{block.where}: {header}"
    for row in rows:
        suite, *_, met = row.split()
        assert suite in SUITES and met in ("yes", "NO"), f"{block.where}: {row}"


def test_every_block_has_a_language_and_known_comments() -> None:
    assert len(BLOCKS) >= 10
    for block in BLOCKS:
        assert block.language, f"{block.where}: a fence without a language"
        for kind, argument in block.markers:
            assert kind in KINDS, f"{block.where}: unknown readme comment {kind!r}"
            assert kind != "skip" or argument, f"{block.where}: a skip without its reason"
    skipped = [b for b in BLOCKS if b.marked("skip")]
    assert skipped[0].page == README, [b.where for b in skipped]  # the architecture diagram,
    assert {b.text for b in skipped} == {skipped[0].text}, [b.where for b in skipped]  # alone


def test_the_readme_is_a_front_door() -> None:
    """At most 200 lines: what it is, the two commands, a quickstart, links to the pages."""
    assert len(README.read_text().splitlines()) <= 200
    for page in PAGES[1:]:  # every page is reachable from the README or the site's home
        linked = f"docs/{page.name}" in README.read_text()
        assert linked or page.name == "index.md", f"README.md links no {page.name}"


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: b.where)
def test_doc_block(block: Block, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    kinds = {kind for kind, _ in block.markers}
    if "skip" in kinds:
        return
    if "tested-by" in kinds:
        check_tested_by(block, tmp_path)
    elif "ci" in kinds:
        check_ci(block)
    elif "env" in kinds:
        check_env(block, tmp_path)
    elif "foreground" in kinds:
        check_foreground(block, tmp_path)
    elif "output-of" in kinds:
        check_output_of(block)
    elif block.language == "toml":
        load_config(_write(tmp_path / "conclave.toml", block.text))
    elif block.language == "haproxy":
        check_haproxy(block, tmp_path)
    elif block.language == "json":
        check_json(block)
    elif block.language in ("python", "bash", "sh"):
        run_block(block, request.getfixturevalue("stack"), tmp_path)
    else:
        pytest.fail(f"{block.where}: a {block.language} block needs a readme: comment")


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
