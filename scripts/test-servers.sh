#!/usr/bin/env bash
# Starts the real servers the scale-out tests use, when they are not running yet: PostgreSQL and
# Redis from Debian's packages (installed if missing) and an S3-compatible server (s3rver, from npm).
# Idempotent and quick when they already run; works as root (PostgreSQL then runs as the `postgres`
# user) and as a normal user. Data lives under one temporary state directory.
#
#   bash scripts/test-servers.sh          # start what is not running; print the connection variables
#   bash scripts/test-servers.sh stop     # stop them and delete their data
#
# Prints `TEST_DATABASE_URL=…`, `TEST_REDIS_URL=…`, `TEST_S3_ENDPOINT=…` lines on stdout (and
# writes them to $STATE/env) for scripts/run-tests.mjs; progress goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."

STATE="${VOICEGEN_TEST_STATE:-${TMPDIR:-/tmp}/voicegen-test-servers-$(id -u)}"
PG_PORT="${VOICEGEN_TEST_PG_PORT:-55432}"
REDIS_PORT="${VOICEGEN_TEST_REDIS_PORT:-56379}"
S3_PORT="${VOICEGEN_TEST_S3_PORT:-54569}"
log() { echo "test-servers: $*" >&2; }

SUDO=""
[ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && SUDO="sudo"

install_missing() {
  local need=()
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
  command -v redis-server >/dev/null || need+=(redis-server)
  command -v nginx >/dev/null || need+=(nginx)
  if [ ${#need[@]} -gt 0 ]; then
    log "installing ${need[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
}

pg_bin() { ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1; }

# Runs a PostgreSQL command as the owner of the data directory (initdb refuses root).
as_pg() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_port() {
  local port=$1 name=$2
  for _ in $(seq 1 100); do
    port_open "$port" && return 0
    sleep 0.1
  done
  log "$name did not start on port $port"
  return 1
}

start_postgres() {
  local bin dir="$STATE/pg"
  bin=$(pg_bin)
  if as_pg "$bin/pg_ctl" -D "$dir" status >/dev/null 2>&1; then return 0; fi
  mkdir -p "$STATE"
  if [ ! -f "$dir/PG_VERSION" ]; then
    rm -rf "$dir"
    mkdir -p "$dir"
    [ "$(id -u)" -eq 0 ] && chown postgres "$dir" && chmod 755 "$STATE"
    log "initdb $dir"
    as_pg "$bin/initdb" -D "$dir" -U postgres --auth=trust -E UTF8 >/dev/null
  fi
  log "starting PostgreSQL on $PG_PORT"
  as_pg "$bin/pg_ctl" -D "$dir" -l "$dir/server.log" -w -o "-p $PG_PORT -k /tmp -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=off" start >/dev/null
}

start_redis() {
  if port_open "$REDIS_PORT"; then return 0; fi
  mkdir -p "$STATE/redis"
  log "starting Redis on $REDIS_PORT"
  redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --dir "$STATE/redis" --save '' --appendonly no \
    --daemonize yes --pidfile "$STATE/redis/redis.pid" --logfile "$STATE/redis/redis.log" >/dev/null
  wait_port "$REDIS_PORT" Redis
}

start_s3() {
  if port_open "$S3_PORT"; then return 0; fi
  if [ ! -d node_modules/@20minutes/s3rver ]; then
    log "s3rver is not installed: run npm ci first"
    return 1
  fi
  mkdir -p "$STATE/s3"
  log "starting s3rver on $S3_PORT"
  nohup node scripts/s3-test-server.mjs "$S3_PORT" "$STATE/s3" >"$STATE/s3.log" 2>&1 &
  echo $! >"$STATE/s3.pid"
  wait_port "$S3_PORT" s3rver
}

stop_all() {
  local bin
  bin=$(pg_bin 2>/dev/null || true)
  [ -n "$bin" ] && [ -d "$STATE/pg" ] && as_pg "$bin/pg_ctl" -D "$STATE/pg" -m immediate stop >/dev/null 2>&1 || true
  [ -f "$STATE/redis/redis.pid" ] && kill "$(cat "$STATE/redis/redis.pid")" 2>/dev/null || true
  [ -f "$STATE/s3.pid" ] && kill "$(cat "$STATE/s3.pid")" 2>/dev/null || true
  rm -rf "$STATE"
  log "stopped"
}

if [ "${1:-start}" = "stop" ]; then
  stop_all
  exit 0
fi

install_missing
start_postgres
start_redis
start_s3

{
  echo "TEST_DATABASE_URL=postgres://postgres@127.0.0.1:$PG_PORT/postgres"
  echo "TEST_REDIS_URL=redis://127.0.0.1:$REDIS_PORT"
  echo "TEST_S3_ENDPOINT=http://127.0.0.1:$S3_PORT"
} | tee "$STATE/env"
