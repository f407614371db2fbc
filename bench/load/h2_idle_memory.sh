#!/usr/bin/env bash
# Memory per idle HTTP/2 connection: Vigil against nginx, one worker each,
# HTTP/2 in clear (prior knowledge) on the same http block. IDLE_CONNS
# connections (default 1000) each exchange SETTINGS and get one response
# (PATH, default /small.txt, 12 bytes; /big.bin is 100 KiB), then stay open
# and idle; the server's RSS growth divided by the connections is printed.
# With TLS=1, over TLS instead (TLS 1.3, ECDSA P-256, ALPN h2).
#
#   bench/load/h2_idle_memory.sh [PATH]
#
# Environment: VIGIL (default build/release/vigil, built if missing), NGINX
# (default /usr/sbin/nginx), IDLE_CONNS, TLS.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=common.sh
. "$ROOT/bench/load/common.sh"
VIGIL=${VIGIL:-$ROOT/build/release/vigil}
NGINX=${NGINX:-/usr/sbin/nginx}
IDLE_CONNS=${IDLE_CONNS:-1000}
WHAT=${1:-/small.txt}
export IDLE_PATH=$WHAT
# Vigil gives an idle session's buffers back on its next tick (within 1 s).
export IDLE_SETTLE=${IDLE_SETTLE:-2}
build_vigil_if_missing
require_tools "$NGINX"
raise_nofile
make_bench_tmp vigil_h2_idle
mkdir -p "$TMP/html" "$TMP/nginx/logs" "$TMP/vigil/logs" "$TMP/vigil/conf" "$TMP/certs"
LISTEN="http2"
if [[ ${TLS:-0} == 1 ]]; then
  require_tools openssl
  make_test_certs "$TMP/certs"
  chmod 755 "$TMP" "$TMP/certs"
  LISTEN="ssl http2;
        ssl_certificate $TMP/certs/ec.crt;
        ssl_certificate_key $TMP/certs/ec.key"
  export IDLE_TLS=1
fi
printf 'hello world\n' > "$TMP/html/small.txt"
head -c 102400 /dev/urandom > "$TMP/html/big.bin"
chmod 755 "$TMP/html"
chmod 644 "$TMP/html/"*
PORT=$(free_port)
http_block() {
  cat <<EOC
http {
    access_log off;
    keepalive_timeout 300s;
    server {
        listen 127.0.0.1:$PORT $LISTEN;
        root $TMP/html;
    }
}
EOC
}
{ echo "error_log $TMP/nginx/logs/error.log error; pid $TMP/nginx/logs/nginx.pid;"
  echo "user root; worker_rlimit_nofile $NOFILE;"
  echo "events { worker_connections $WORKER_CONNECTIONS; }"
  http_block; } > "$TMP/nginx/nginx.conf"
{ echo "daemon off; master_process off; worker_processes 1;"
  echo "error_log $TMP/vigil/logs/error.log notice; pid $TMP/vigil/logs/vigil.pid;"
  echo "events { worker_connections $WORKER_CONNECTIONS; }"
  http_block; } > "$TMP/vigil/conf/vigil.conf"

for server in nginx vigil; do
  if [[ $server == nginx ]]; then
    "$NGINX" -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" -g 'daemon off; master_process off;' &
  else
    "$VIGIL" -p "$TMP/vigil" -c conf/vigil.conf 2>>"$TMP/vigil/logs/stderr" &
  fi
  pid=$!
  PIDS+=("$pid")
  wait_port "$PORT"
  # Warm: the worker's lazily made state exists before the measure.
  python3 "$ROOT/bench/load/idle_h2_clients.py" "$PORT" 10 "$WHAT" </dev/null >/dev/null
  idle_bytes_per_conn "$server" "$pid" idle_h2_clients.py 600 "idle HTTP/2 connections after $WHAT"
  echo "| $server | $IDLE_CONNS | $WHAT | $IDLE_BYTES |"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
done
