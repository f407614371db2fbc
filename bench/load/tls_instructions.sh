#!/usr/bin/env bash
# User-space instructions per keep-alive 12-byte request over TLS, counted by
# callgrind: a figure the machine's load does not move (the CPU-time figures
# of tls_vs_nginx.sh do, on a shared machine). One worker, no master, for
# nginx and each Vigil binary given, with tls_vs_nginx.sh's TLS directives;
# CONNS keep-alive connections (20) x ROUNDS lock-step rounds (100) after 3
# warm-up rounds, counted from callgrind_control -z to -d. The kernel's share
# (about 70% of the CPU time) is not counted.
#
#   bench/load/tls_instructions.sh [VIGIL_BINARY...]    (default build/release/vigil)
#
# Environment: NGINX (/usr/sbin/nginx; NGINX= skips it), CONNS, ROUNDS.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
NGINX=${NGINX-/usr/sbin/nginx}
CONNS=${CONNS:-20}
ROUNDS=${ROUNDS:-100}
BINS=("$@")
[[ ${#BINS[@]} -gt 0 ]] || BINS=("$ROOT/build/release/vigil")
# shellcheck source=common.sh
. "$ROOT/bench/load/common.sh"
require_tools valgrind callgrind_control openssl python3 curl

TMP=$(mktemp -d /tmp/vigil_tls_insn.XXXXXX)
chmod 755 "$TMP"
VG=""
cleanup() {
  [[ -n $VG ]] && kill "$VG" 2>/dev/null && wait "$VG" 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT

mkdir -p "$TMP/html" "$TMP/certs" "$TMP/logs" "$TMP/conf"
printf 'hello world\n' > "$TMP/html/small.txt"
make_test_certs "$TMP/certs"
PORT=$(free_port)
HTTP="http {
    access_log off;
    sendfile on;
    server {
        $(tls_server_block "$PORT" "$TMP/html" "$TMP/certs")
    }
}"
cat > "$TMP/conf/nginx.conf" <<CONF
worker_processes 1;
error_log $TMP/logs/nginx.error.log error;
pid $TMP/logs/nginx.pid;
events { worker_connections 1024; }
$HTTP
CONF
cat > "$TMP/conf/vigil.conf" <<CONF
daemon off;
master_process off;
worker_processes 1;
error_log $TMP/logs/vigil.error.log notice;
pid $TMP/logs/vigil.pid;
events { worker_connections 1024; }
$HTTP
CONF

count() {  # label command...
  local label=$1
  shift
  valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.%p" "$@" 2>"$TMP/valgrind.log" &
  VG=$!
  local up=0
  for _ in $(seq 1 200); do
    if curl -sk -o /dev/null "https://127.0.0.1:$PORT/small.txt"; then up=1; break; fi
    sleep 0.2
  done
  [[ $up == 1 ]] || { echo "$label did not come up" >&2; exit 1; }
  local n ir
  n=$(python3 "$ROOT/bench/load/tls_keepalive_rounds.py" "$PORT" "$CONNS" "$ROUNDS" "$VG")
  sleep 0.5
  ir=$(awk '/^summary:/ {print $2; exit}' "$(ls -t "$TMP"/cg.* | head -1)")
  kill "$VG" 2>/dev/null || true
  wait "$VG" 2>/dev/null || true
  VG=""
  rm -f "$TMP"/cg.*
  echo "$label: $n requests, $ir instructions, $((ir / n)) per request"
}

[[ -n $NGINX ]] && count nginx "$NGINX" -p "$TMP" -c "$TMP/conf/nginx.conf" -g 'daemon off; master_process off;'
for bin in "${BINS[@]}"; do
  count "$bin" "$bin" -p "$TMP" -c conf/vigil.conf
done
