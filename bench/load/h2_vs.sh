#!/usr/bin/env bash
# HTTP/2 over TLS: Vigil against nginx and h2o serving the same files with
# the same certificate (ECDSA P-256), one worker (thread) each pinned to CPU
# 0, h2load on CPU 1, alternately: for each case and round, nginx, h2o, then
# Vigil. Cases: a 12-byte and a 100 KiB file with 10 connections x 100
# concurrent streams, the 12-byte file with 1,000 connections x 1 stream,
# and the 12-byte file proxied (10 x 100 streams) to an HTTP/1.1 backend
# (nginx, one worker on CPU 1) over kept-alive connections (up to 1,024
# idle ones kept: as many as there are requests in flight). Reports the
# medians of requests/s and of the server's CPU time per request; a round
# where h2load saw a failed request or a non-2xx status is reported.
#
#   bench/load/h2_vs.sh [ROUNDS [SECONDS]]     (default 3 rounds of 5 s)
#
# Environment: VIGIL (default build/release/vigil, built if missing), NGINX
# (default /usr/sbin/nginx), H2O (default /usr/bin/h2o), CASES (default
# "small big conns proxy"), OPEN_FILE_CACHE (default off: nginx and Vigil open
# each file per request; on: both keep open files with
# `open_file_cache max=1000`, as h2o's file handler does by default).
set -euo pipefail

ROUNDS=${1:-3}
DURATION=${2:-5}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=common.sh
. "$ROOT/bench/load/common.sh"
VIGIL=${VIGIL:-$ROOT/build/release/vigil}
NGINX=${NGINX:-/usr/sbin/nginx}
H2O=${H2O:-/usr/bin/h2o}
CASES=${CASES:-"small big conns proxy"}

build_vigil_if_missing
require_tools "$NGINX" "$H2O" h2load taskset openssl
raise_nofile
make_bench_tmp vigil_h2_bench

mkdir -p "$TMP/html" "$TMP/certs" "$TMP/nginx/logs" "$TMP/vigil/logs" "$TMP/vigil/conf" "$TMP/h2o" \
  "$TMP/backend/logs"
make_test_certs "$TMP/certs"
printf 'hello world\n' > "$TMP/html/small.txt"
head -c 102400 /dev/urandom > "$TMP/html/big.bin"
chmod 755 "$TMP" "$TMP/html" "$TMP/certs"
chmod 644 "$TMP/html/"*
PORT=$(free_port)
BACKEND_PORT=$(free_port)

# The same http block for nginx and Vigil: TLS with the ECDSA certificate,
# HTTP/2 on the port, sendfile off (HTTP/2 copies into frames either way).
http_block() {
  local ofc=""
  if [[ ${OPEN_FILE_CACHE:-off} == on ]]; then ofc="        open_file_cache max=1000;"; fi
  cat <<EOF
http {
    access_log off;
    server {
        listen 127.0.0.1:$PORT ssl http2;
        root $TMP/html;
        ssl_certificate $TMP/certs/ec.crt;
        ssl_certificate_key $TMP/certs/ec.key;
        ssl_protocols TLSv1.2 TLSv1.3;
        http2_max_concurrent_streams 128;
        keepalive_requests 1000000;
$ofc
        location /proxy/ {
            proxy_pass http://backend/;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
    upstream backend {
        server 127.0.0.1:$BACKEND_PORT;
        keepalive 1024;
    }
}
EOF
}

# The backend of the proxied case: nginx, one worker on CPU 1 (with
# h2load), serving the same directory over HTTP/1.1, for the whole run.
start_backend() {
  cat > "$TMP/backend/nginx.conf" <<EOF
error_log $TMP/backend/logs/error.log error; pid $TMP/backend/logs/nginx.pid;
user root;
events { worker_connections 4096; }
http {
    access_log off;
    server {
        listen 127.0.0.1:$BACKEND_PORT;
        root $TMP/html;
        keepalive_requests 1000000;
        open_file_cache max=100;
    }
}
EOF
  taskset -c 1 "$NGINX" -p "$TMP/backend" -c "$TMP/backend/nginx.conf" -g 'daemon off; master_process off;' &
  PIDS+=($!)
  wait_port "$BACKEND_PORT"
}

SERVER_PIDS=()
start_nginx() {
  { echo "error_log $TMP/nginx/logs/error.log error; pid $TMP/nginx/logs/nginx.pid;"
    echo "user root;"
    echo "events { worker_connections 4096; }"
    http_block; } > "$TMP/nginx/nginx.conf"
  taskset -c 0 "$NGINX" -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" -g 'daemon off; master_process off;' &
  SERVER_PIDS=($!)
  PIDS+=($!)
  wait_port "$PORT"
}

start_vigil() {
  { echo "daemon off; master_process off; worker_processes 1;"
    echo "error_log $TMP/vigil/logs/error.log notice; pid $TMP/vigil/logs/vigil.pid;"
    echo "events { worker_connections 4096; use epoll; }"
    http_block; } > "$TMP/vigil/conf/vigil.conf"
  taskset -c 0 "$VIGIL" -p "$TMP/vigil" -c conf/vigil.conf 2>>"$TMP/vigil/logs/stderr" &
  SERVER_PIDS=($!)
  PIDS+=($!)
  wait_port "$PORT"
}

start_h2o() {
  cat > "$TMP/h2o/h2o.conf" <<EOF
num-threads: 1
user: root
pid-file: $TMP/h2o/h2o.pid
error-log: $TMP/h2o/error.log
http2-max-concurrent-requests-per-connection: 128
hosts:
  "localhost":
    listen:
      host: 127.0.0.1
      port: $PORT
      ssl:
        certificate-file: $TMP/certs/ec.crt
        key-file: $TMP/certs/ec.key
        minimum-version: TLSv1.2
    paths:
      "/proxy/":
        proxy.reverse.url: http://127.0.0.1:$BACKEND_PORT/
      "/":
        file.dir: $TMP/html
EOF
  taskset -c 0 "$H2O" -c "$TMP/h2o/h2o.conf" >"$TMP/h2o/stdout" 2>&1 &
  SERVER_PIDS=($!)
  PIDS+=($!)
  wait_port "$PORT"
}

# "requests/s server-CPU-us/request" for one h2load run.
run_h2load() {  # case
  local path conns streams out t0 t1
  case $1 in
    small) path=/small.txt conns=10 streams=100 ;;
    big) path=/big.bin conns=10 streams=100 ;;
    conns) path=/small.txt conns=1000 streams=1 ;;
    proxy) path=/proxy/small.txt conns=10 streams=100 ;;
  esac
  t0=$(server_ticks)
  out=$(taskset -c 1 h2load -t1 -c"$conns" -m"$streams" -D"$DURATION" --warm-up-time=1 \
    "https://127.0.0.1:$PORT$path" 2>&1)
  t1=$(server_ticks)
  local done ok failed non2xx rps
  read -r done ok failed <<<"$(awk '/^requests:/ {print $8, $10, $12}' <<<"$out")"
  non2xx=$(awk '/^status codes:/ {print $5 + $7 + $9}' <<<"$out" | tr -d ',')
  rps=$(awk '/^finished in/ {print $4}' <<<"$out")
  if [[ ${failed:-1} != 0 || ${non2xx:-0} != 0 ]]; then
    echo "h2load reported failures: $(grep -E '^(requests|status codes):' <<<"$out" | tr '\n' ' ')" >&2
  fi
  awk -v r="$rps" -v n="${done:-0}" -v t=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" \
    'BEGIN {printf "%s %.1f\n", r, (n > 0 ? t * 1e6 / hz / n : 0)}'
}

[[ " $CASES " == *" proxy "* ]] && start_backend
declare -A RPS CPU
SERVERS="nginx h2o vigil"
echo "open_file_cache: ${OPEN_FILE_CACHE:-off}; vigil: $VIGIL; nginx: $($NGINX -v 2>&1 | sed 's/.*: //'); $($H2O --version | head -1); ${ROUNDS} rounds of ${DURATION}s" >&2
for c in $CASES; do
  declare -A res=() cpu=()
  for r in $(seq 1 "$ROUNDS"); do
    msg="  $c round $r:"
    for srv in $SERVERS; do
      "start_$srv"
      read -r l_rps l_cpu <<<"$(run_h2load "$c")"
      res[$srv]+="$l_rps "
      cpu[$srv]+="$l_cpu "
      stop_server
      msg+=" $srv $l_rps req/s $l_cpu us/req;"
    done
    echo "$msg" >&2
  done
  for srv in $SERVERS; do
    RPS[$c,$srv]=$(median_of "${res[$srv]}")
    CPU[$c,$srv]=$(median_of "${cpu[$srv]}")
  done
  unset res cpu
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0 && a > 0) printf "%.2f", a / b; else print "-"}'; }
label() {
  case $1 in
    small) echo "12 B, 10 conns x 100 streams" ;;
    big) echo "100 KiB, 10 conns x 100 streams" ;;
    conns) echo "12 B, 1,000 conns x 1 stream" ;;
    proxy) echo "12 B proxied to HTTP/1.1, 10 conns x 100 streams" ;;
  esac
}
echo
echo "| case | nginx req/s | h2o req/s | vigil req/s | vigil/nginx | vigil/h2o | server CPU us/req (nginx / h2o / vigil) |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for c in $CASES; do
  echo "| $(label "$c") | ${RPS[$c,nginx]} | ${RPS[$c,h2o]} | ${RPS[$c,vigil]} | $(ratio "${RPS[$c,vigil]}" "${RPS[$c,nginx]}") | $(ratio "${RPS[$c,vigil]}" "${RPS[$c,h2o]}") | ${CPU[$c,nginx]} / ${CPU[$c,h2o]} / ${CPU[$c,vigil]} |"
done
