#!/usr/bin/env bash
# A single-node Apache Kafka (KRaft) on 127.0.0.1, assembled from Maven Central jars.
#
#   ops/kafka/kafka.sh [--secure] [--port N] [--controller-port N] COMMAND
#     fetch     download the pinned broker jars into the cache (once; later runs reuse them)
#     up        fetch if needed, format on first use, start, wait until clients are served
#               (already up: no-op)
#     down      stop the broker by its PID file and wait for it to exit (not running: no-op)
#     status    exit 0 when this broker is running and serving clients
#     logs [N]  the last N (default 200) lines of the broker log
#     clean     stop, then delete this broker's data and logs (the jars stay cached)
#     acquire   for programs sharing the broker (tests, the demo): `up`, plus a lease held
#               by the calling process (or LOOPWATCH_KAFKA_LEASE=PID)
#     release   drop that lease; stop the broker if a lease holder started it and no live
#               lease remains (a broker someone started with `up` is never stopped here)
#     datadir   print this broker's data directory (PID file, logs, leases)
#     env USER [sasl|mtls]   (--secure only) the client settings of USER, as KEY=VALUE lines
#
# --secure: a second, separate broker (own ports, own data directory) that demands
#   authentication and enforces ACLs: SASL_SSL with SCRAM-SHA-512/256 users on PORT
#   (default 9192), TLS with required client certificates (mTLS) on PORT + 1, its
#   controller on PORT + 2. At first `up` it makes a CA, certificates and passwords
#   (openssl, nothing fetched) under <datadir>/tls and <datadir>/secrets, creates the
#   SCRAM users at format time, and writes each user's client settings to
#   <datadir>/clients/USER.{sasl,mtls}.env. Users (= principals): admin (the only super
#   user), worker, runtime, dashboard, bridge, and tenant-{a,b}-{worker,runtime};
#   the certificate of CN=NAME is the principal User:NAME. No ACLs are made here: only
#   admin can do anything until someone grants rights: `loopwatch acls --apply` as admin
#   (docs/operations.md, "Least privilege"; tenant-* users: "Tenants apart").
#
# Environment (all optional):
#   KAFKA_PORT (9092; --secure: KAFKA_SECURE_PORT, 9192), KAFKA_CONTROLLER_PORT (port + 1;
#   --secure: port + 2), KAFKA_VERSION (pinned below),
#   LOOPWATCH_KAFKA_CACHE (<repo>/.cache/kafka: jars and data), KAFKA_DATA_DIR
#   (<cache>/broker-<port>), KAFKA_READY_TIMEOUT seconds (90), KAFKA_HEAP_OPTS, JAVA_HOME, MVN.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"

# Keep in step with pom.xml and docker-compose.yml.
KAFKA_VERSION="${KAFKA_VERSION:-4.1.2}"
PORT=""
CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-}"
SECURE=""
SECURE_USERS=(admin worker runtime dashboard bridge
    tenant-a-worker tenant-a-runtime tenant-b-worker tenant-b-runtime)

die() { echo "kafka.sh: $*" >&2; exit 1; }
say() { echo "kafka.sh: $*"; }

COMMAND=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --port) PORT="$2"; shift 2 ;;
        --secure) SECURE=1; shift ;;
        --controller-port) CONTROLLER_PORT="$2"; shift 2 ;;
        -h|--help) sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) [[ -z "$COMMAND" ]] || break; COMMAND="$1"; shift ;;
    esac
done
if [[ -n "$SECURE" ]]; then PORT="${PORT:-${KAFKA_SECURE_PORT:-9192}}"; else PORT="${PORT:-${KAFKA_PORT:-9092}}"; fi
[[ "$PORT" =~ ^[0-9]+$ ]] || die "the port must be a number, got '$PORT'"
MTLS_PORT=$((PORT + 1))
if [[ -n "$SECURE" ]]; then CONTROLLER_PORT="${CONTROLLER_PORT:-$((PORT + 2))}"; else CONTROLLER_PORT="${CONTROLLER_PORT:-$((PORT + 1))}"; fi
[[ "$CONTROLLER_PORT" =~ ^[0-9]+$ ]] || die "the controller port must be a number, got '$CONTROLLER_PORT'"

CACHE="${LOOPWATCH_KAFKA_CACHE:-$REPO/.cache/kafka}"
LIBS="$CACHE/kafka_2.13-$KAFKA_VERSION/libs"
if [[ -n "$SECURE" ]]; then DATA="${KAFKA_DATA_DIR:-$CACHE/secure-broker-$PORT}"; else DATA="${KAFKA_DATA_DIR:-$CACHE/broker-$PORT}"; fi
LOGS="$DATA/logs"
TLS="$DATA/tls"
SECRETS="$DATA/secrets"
CLIENTS="$DATA/clients"
PID_FILE="$DATA/kafka.pid"
READY_TIMEOUT="${KAFKA_READY_TIMEOUT:-90}"
JAVA="${JAVA_HOME:+$JAVA_HOME/bin/}java"
MVN="${MVN:-mvn}"
PYTHON="${PYTHON:-python3}"

# One `up`/`down` at a time per broker: parallel test sessions may race to start it.
LOCKED=""
lock() {
    [[ -z "$LOCKED" ]] || return 0
    LOCKED=1
    mkdir -p "$DATA"
    exec 9>"$DATA/.lock"
    flock -w 300 9 || die "timed out waiting for another kafka.sh on $DATA"
}

fetch() {
    [[ -f "$LIBS/.complete" ]] && return 0
    command -v "$MVN" >/dev/null || die "Maven ('$MVN') is needed to fetch the Kafka jars"
    say "fetching Apache Kafka $KAFKA_VERSION jars with Maven into $LIBS"
    local work="$CACHE/kafka_2.13-$KAFKA_VERSION"
    mkdir -p "$work"
    cp "$HERE/pom.xml" "$work/pom.xml"
    rm -rf "$work/libs.partial"
    # Maven's output only matters when it fails; it goes to a log shown then
    "$MVN" -B -f "$work/pom.xml" dependency:copy-dependencies \
        -Dkafka.version="$KAFKA_VERSION" -DincludeScope=runtime \
        -DoutputDirectory="$work/libs.partial" >"$work/mvn.log" 2>&1 \
        || { tail -n 40 "$work/mvn.log" >&2; die "Maven could not fetch org.apache.kafka:kafka_2.13:$KAFKA_VERSION (log: $work/mvn.log)"; }
    rm -rf "$LIBS"
    mv "$work/libs.partial" "$LIBS"
    echo "$KAFKA_VERSION" >"$LIBS/.complete"
}

broker_pid() {
    [[ -f "$PID_FILE" ]] || return 1
    local pid
    pid="$(cat "$PID_FILE")"
    # the PID must still be our broker, not a recycled number
    [[ -n "$pid" ]] && grep -qa 'kafka.Kafka' "/proc/$pid/cmdline" 2>/dev/null || return 1
    echo "$pid"
}

port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

probe() {
    if [[ -n "$SECURE" ]]; then
        # over mTLS as admin: the probe's Metadata request needs no ACL
        "$PYTHON" "$HERE/probe.py" "127.0.0.1:$MTLS_PORT" --cafile "$TLS/ca.crt" \
            --certfile "$TLS/admin.crt" --keyfile "$TLS/admin.key" "$@"
    else
        "$PYTHON" "$HERE/probe.py" "127.0.0.1:$PORT" "$@"
    fi
}

# --secure: a CA, the broker's certificate, one client certificate per user, an expired
# and an untrusted one (for the bad-certificate tests), one password per user. Made once.
make_secrets() {
    [[ -f "$SECRETS/.complete" ]] && return 0
    command -v openssl >/dev/null || die "openssl is needed for --secure"
    rm -rf "$TLS" "$SECRETS"
    mkdir -p "$TLS" "$SECRETS"
    chmod 700 "$TLS" "$SECRETS"
    local log="$LOGS/tls.out"
    {
        openssl req -x509 -newkey rsa:2048 -nodes -keyout "$TLS/ca.key" -out "$TLS/ca.crt" \
            -days 3650 -subj "/CN=loopwatch-local-ca"
        # a CA nobody trusts, for the untrusted-certificate case
        openssl req -x509 -newkey rsa:2048 -nodes -keyout "$TLS/rogue-ca.key" \
            -out "$TLS/rogue-ca.crt" -days 3650 -subj "/CN=rogue-ca"
    } >>"$log" 2>&1 || { tail -n 20 "$log" >&2; die "openssl could not make the CA"; }
    local name
    for name in broker "${SECURE_USERS[@]}" expired untrusted; do
        local ca=ca days=825 cn="$name"
        case "$name" in
            expired) cn=runtime; days=-1 ;;          # notAfter a day before notBefore
            untrusted) cn=runtime; ca=rogue-ca ;;
        esac
        printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$TLS/$name.ext"
        {
            openssl req -newkey rsa:2048 -nodes -keyout "$TLS/$name.key" -out "$TLS/$name.csr" \
                -subj "/CN=$cn"
            openssl x509 -req -in "$TLS/$name.csr" -CA "$TLS/$ca.crt" -CAkey "$TLS/$ca.key" \
                -CAcreateserial -days "$days" -extfile "$TLS/$name.ext" -out "$TLS/$name.crt"
        } >>"$log" 2>&1 || { tail -n 20 "$log" >&2; die "openssl could not make the $name certificate"; }
        rm -f "$TLS/$name.csr" "$TLS/$name.ext"
    done
    cat "$TLS/broker.key" "$TLS/broker.crt" >"$TLS/broker.pem"
    chmod 600 "$TLS"/*.key "$TLS/broker.pem"
    for name in "${SECURE_USERS[@]}"; do
        (umask 077; head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' >"$SECRETS/$name.password")
    done
    touch "$SECRETS/.complete"
}

# KEY=VALUE client settings of one user, over SASL_SSL or mTLS
client_env() {  # user kind
    local user="$1" kind="${2:-sasl}"
    [[ -f "$SECRETS/$user.password" ]] || die "no user '$user' (users: ${SECURE_USERS[*]})"
    case "$kind" in
        sasl) printf '%s\n' "KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:$PORT" "KAFKA_SECURITY_PROTOCOL=SASL_SSL" \
            "KAFKA_SASL_MECHANISM=SCRAM-SHA-512" "KAFKA_SASL_USERNAME=$user" \
            "KAFKA_SASL_PASSWORD=$(cat "$SECRETS/$user.password")" "KAFKA_SSL_CAFILE=$TLS/ca.crt" ;;
        mtls) printf '%s\n' "KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:$MTLS_PORT" "KAFKA_SECURITY_PROTOCOL=SSL" \
            "KAFKA_SSL_CAFILE=$TLS/ca.crt" "KAFKA_SSL_CERTFILE=$TLS/$user.crt" "KAFKA_SSL_KEYFILE=$TLS/$user.key" ;;
        *) die "the kind of client settings is sasl or mtls, got '$kind'" ;;
    esac
}

write_client_envs() {
    mkdir -p "$CLIENTS"
    chmod 700 "$CLIENTS"
    local name
    for name in "${SECURE_USERS[@]}"; do
        (umask 077; client_env "$name" sasl >"$CLIENTS/$name.sasl.env"; client_env "$name" mtls >"$CLIENTS/$name.mtls.env")
    done
}

# JVM flags shared by the format tool and the broker
jvm_flags() {
    JVM_FLAGS=(-XX:+UseG1GC -Djava.awt.headless=true
        -Dlog4j2.configurationFile="$HERE/log4j2.properties" -Dkafka.logs.dir="$LOGS"
        -cp "$LIBS/*")
}

render_config() {
    local template="$HERE/server.properties.template"
    [[ -z "$SECURE" ]] || template="$HERE/server-secure.properties.template"
    sed -e "s|@PORT@|$PORT|g" -e "s|@CONTROLLER_PORT@|$CONTROLLER_PORT|g" \
        -e "s|@MTLS_PORT@|$MTLS_PORT|g" -e "s|@TLS_DIR@|$TLS|g" \
        -e "s|@LOG_DIRS@|$DATA/kraft|g" "$template" >"$DATA/server.properties"
}

format_once() {
    [[ -f "$DATA/kraft/meta.properties" ]] && return 0
    # a cluster id is any 16 random bytes in url-safe base64 without padding
    local cluster_id
    cluster_id="$(head -c16 /dev/urandom | base64 | tr '+/' '-_' | cut -c1-22)"
    jvm_flags
    local scram=()
    if [[ -n "$SECURE" ]]; then
        local name mechanism
        for name in "${SECURE_USERS[@]}"; do
            for mechanism in SCRAM-SHA-512 SCRAM-SHA-256; do
                scram+=(--add-scram "$mechanism=[name=$name,password=$(cat "$SECRETS/$name.password")]")
            done
        done
    fi
    # `--cluster-id=`: an id may start with "-" (1 in 64), which `-t ID` took for an option
    "$JAVA" -Xmx256m "${JVM_FLAGS[@]}" kafka.tools.StorageTool format --cluster-id="$cluster_id" \
        -c "$DATA/server.properties" -g "${scram[@]}" >>"$LOGS/format.out" 2>&1 \
        || { tail -n 50 "$LOGS/format.out" >&2; die "formatting $DATA/kraft failed"; }
}

show_log_tail() {
    echo "---- last lines of $LOGS/server.log ----" >&2
    tail -n "${1:-80}" "$LOGS/server.log" >&2 2>/dev/null || echo "(no server.log)" >&2
    echo "---- last lines of $LOGS/kafka.out (JVM stdout/stderr) ----" >&2
    tail -n 30 "$LOGS/kafka.out" >&2 2>/dev/null || echo "(no kafka.out)" >&2
}

stop_pid() {
    local pid="$1"
    kill -TERM "$pid" 2>/dev/null || return 0
    # a controlled shutdown takes a few seconds; give it 30 before SIGKILL
    local deadline=$((SECONDS + 30))
    while kill -0 "$pid" 2>/dev/null && [[ $SECONDS -lt $deadline ]]; do sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then
        say "broker $pid did not stop within 30 s; killing it"
        kill -KILL "$pid" 2>/dev/null || true
        while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    fi
}

# LEASED=1 while acquiring: a broker started then belongs to the lease holders
LEASED=""
LEASES="$DATA/leases"
STARTED_BY_LEASE="$DATA/started-by-lease"

cmd_up() {
    lock
    local pid
    if pid="$(broker_pid)"; then
        probe --deadline "$READY_TIMEOUT" --pid "$pid" || { show_log_tail; die "broker $pid is running but not serving clients"; }
        # a person asking for the broker takes it over: lease holders then leave it up
        [[ -n "$LEASED" ]] || rm -f "$STARTED_BY_LEASE"
        say "already up on 127.0.0.1:$PORT (pid $pid)"
        return 0
    fi
    local ports=("$PORT" "$CONTROLLER_PORT")
    [[ -z "$SECURE" ]] || ports+=("$MTLS_PORT")
    for p in "${ports[@]}"; do
        port_taken "$p" && die "port $p on 127.0.0.1 is already in use by another process; \
choose others with --port/--controller-port (KAFKA_PORT/KAFKA_CONTROLLER_PORT)"
    done
    command -v "$JAVA" >/dev/null || die "Java 17+ ('$JAVA') is needed to run Kafka"
    fetch
    mkdir -p "$LOGS"
    [[ -z "$SECURE" ]] || { make_secrets; write_client_envs; }
    render_config
    format_once
    local started=$SECONDS
    # 9>&-: the broker must not inherit (and so hold for ever) the lock.
    # Job control gives the broker its own process group, so a Ctrl-C meant for the
    # caller does not reach it; it is stopped by `down`, by its PID.
    set -m
    jvm_flags
    # The GC log as Kafka's own start script writes it: the broker's pauses stall every
    # client on a shared machine, and a latency tail is read against it
    # (docs/performance.md, "The host's steal and the broker's collections").
    local gc_log=(-Xlog:"gc*:file=$LOGS/kafkaServer-gc.log:time,tags:filecount=10,filesize=100M")
    # shellcheck disable=SC2086  # KAFKA_HEAP_OPTS holds several JVM flags
    nohup "$JAVA" ${KAFKA_HEAP_OPTS:--Xms256m -Xmx1g} -XX:MaxGCPauseMillis=20 "${gc_log[@]}" \
        "${JVM_FLAGS[@]}" kafka.Kafka "$DATA/server.properties" </dev/null \
        >>"$LOGS/kafka.out" 2>&1 9>&- &
    pid=$!
    set +m
    echo "$pid" >"$PID_FILE"
    if [[ -n "$LEASED" ]]; then touch "$STARTED_BY_LEASE"; else rm -f "$STARTED_BY_LEASE"; fi
    if ! probe --deadline "$READY_TIMEOUT" --pid "$pid"; then
        show_log_tail
        stop_pid "$pid"
        rm -f "$PID_FILE"
        die "the broker did not serve clients within ${READY_TIMEOUT} s (logs: $LOGS)"
    fi
    say "up on 127.0.0.1:$PORT (pid $pid, ready in $((SECONDS - started)) s; logs: $LOGS)"
    [[ -z "$SECURE" ]] || show_client_settings
}

show_client_settings() {
    say "secured: SASL_SSL (SCRAM-SHA-512/256) on 127.0.0.1:$PORT, mTLS on 127.0.0.1:$MTLS_PORT"
    say "client settings per user (the password stays in its file):"
    say "  set -a; . $CLIENTS/admin.sasl.env; set +a     # or USER.mtls.env; users: ${SECURE_USERS[*]}"
    client_env admin sasl | sed -e 's/^KAFKA_SASL_PASSWORD=.*/KAFKA_SASL_PASSWORD=<'"${SECRETS//\//\\/}"'\/admin.password>/' -e 's/^/    /'
}

cmd_down() {
    lock
    local pid
    if ! pid="$(broker_pid)"; then
        rm -f "$PID_FILE"
        say "not running (port $PORT)"
        return 0
    fi
    stop_pid "$pid"
    rm -f "$PID_FILE"
    say "stopped broker $pid"
}

lease_file() { echo "$LEASES/${LOOPWATCH_KAFKA_LEASE:-$PPID}"; }

cmd_acquire() {
    lock
    LEASED=1
    cmd_up
    mkdir -p "$LEASES"
    touch "$(lease_file)"
}

cmd_release() {
    lock
    rm -f "$(lease_file)"
    local lease
    for lease in "$LEASES"/*; do
        [[ -e "$lease" ]] || continue
        if kill -0 "$(basename "$lease")" 2>/dev/null; then
            say "left running: lease $(basename "$lease") still holds it"
            return 0
        fi
        rm -f "$lease"  # its holder has exited without releasing
    done
    if [[ -f "$STARTED_BY_LEASE" ]]; then
        rm -f "$STARTED_BY_LEASE"
        cmd_down
    else
        say "left running: it was started with \`up\`, not by a lease holder"
    fi
}

cmd_status() {
    local pid
    pid="$(broker_pid)" || { say "not running (port $PORT)"; return 1; }
    probe || { say "pid $pid is running but not serving clients"; return 1; }
    say "up on 127.0.0.1:$PORT (pid $pid)"
}

case "$COMMAND" in
    fetch) fetch; say "jars ready in $LIBS" ;;
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    logs) tail -n "${1:-200}" "$LOGS/server.log" ;;
    clean) cmd_down; rm -rf "$DATA"; say "removed $DATA" ;;
    acquire) cmd_acquire ;;
    release) cmd_release ;;
    datadir) echo "$DATA" ;;
    env) [[ -n "$SECURE" ]] || die "env is for the --secure broker"; client_env "$@" ;;
    *) die "unknown command '${COMMAND}'; try: fetch | up | down | status | logs [N] | clean | acquire | release | datadir | env" ;;
esac
