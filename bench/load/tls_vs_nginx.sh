#!/usr/bin/env bash
# Vigil's HTTPS against nginx's, same machine, same certificates (ECDSA P-256
# and RSA 2048 on one server, the client picks ECDSA), same ciphers (OpenSSL's
# TLS 1.3 defaults; "HIGH:!aNULL:!MD5" for 1.2), same files, alternating
# rounds (nginx, then Vigil), medians reported.
#
#   bench/load/tls_vs_nginx.sh [ROUNDS [SECONDS]]      (default 3 rounds of 5 s)
#
# Cases (CASES, space-separated subset):
#   new        new TLS 1.3 handshakes/s: openssl s_time -new -tls1_3, one
#              request (12 bytes) per connection
#   resumed    resumed handshakes/s: openssl s_time -reuse (TLS 1.3 tickets)
#   small      keep-alive 12-byte requests over TLS: wrk -c50
#   big        a 1 MiB file over TLS: wrk -c50
#   new2 small2 the same with two workers (master + 2 workers, unpinned)
#   memory     bytes per idle TLS connection: (RSS with N idle - RSS before)/N,
#              N = IDLE_CONNS (5,000), one request on each first
# With one worker the server is pinned to CPU 0 and the client to CPU 1.
#
# Environment: VIGIL (default build/release/vigil), NGINX (/usr/sbin/nginx),
# CASES, IDLE_CONNS.
set -euo pipefail

ROUNDS=${1:-3}
DURATION=${2:-5}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VIGIL=${VIGIL:-$ROOT/build/release/vigil}
NGINX=${NGINX:-/usr/sbin/nginx}
CASES=${CASES:-"new resumed small big new2 small2 memory"}
IDLE_CONNS=${IDLE_CONNS:-5000}

if [[ ! -x $VIGIL ]]; then
  echo "building $VIGIL" >&2
  (cd "$ROOT" && cmake --preset release >/dev/null && cmake --build --preset release -j2 --target vigil >/dev/null)
fi
for tool in "$NGINX" wrk openssl taskset python3; do
  command -v "$tool" >/dev/null || { echo "missing $tool" >&2; exit 1; }
done

ulimit -n "$(ulimit -Hn)"
NOFILE=$(ulimit -n)
WORKER_CONNECTIONS=$((NOFILE - 100))

TMP=$(mktemp -d /tmp/vigil_tls_bench.XXXXXX)
chmod 755 "$TMP"
PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [[ -n $p ]] && kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [[ -n ${KEEP_TMP:-} ]] || rm -rf "$TMP"
}
trap cleanup EXIT

mkdir -p "$TMP/html" "$TMP/nginx/logs" "$TMP/vigil/logs" "$TMP/vigil/conf" "$TMP/certs"
printf 'hello world\n' > "$TMP/html/small.txt"      # 12 bytes
head -c 1048576 /dev/urandom > "$TMP/html/big.bin"  # 1 MiB
(
  cd "$TMP/certs"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ec.key \
    -out ec.crt -days 2 -subj /CN=localhost 2>/dev/null
  openssl req -x509 -newkey rsa:2048 -nodes -keyout rsa.key -out rsa.crt -days 2 \
    -subj /CN=localhost 2>/dev/null
  chmod 644 ./*
)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

# The TLS part both servers share: the same directives mean the same thing.
TLS_BLOCK="listen 127.0.0.1:$PORT ssl;
        root $TMP/html;
        ssl_certificate $TMP/certs/ec.crt;
        ssl_certificate_key $TMP/certs/ec.key;
        ssl_certificate $TMP/certs/rsa.crt;
        ssl_certificate_key $TMP/certs/rsa.key;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_ciphers HIGH:!aNULL:!MD5;
        ssl_session_cache shared:SSL:10m;
        ssl_session_tickets on;"

nginx_conf() {  # workers
  cat > "$TMP/nginx/nginx.conf" <<EOF
worker_processes $1;
worker_rlimit_nofile $NOFILE;
error_log $TMP/nginx/logs/error.log error;
pid $TMP/nginx/logs/nginx.pid;
events { worker_connections $WORKER_CONNECTIONS; }
http {
    access_log off;
    sendfile on;
    server {
        $TLS_BLOCK
    }
}
EOF
}

vigil_conf() {  # workers
  local master=off
  [[ $1 -gt 1 ]] && master=on
  cat > "$TMP/vigil/conf/vigil.conf" <<EOF
daemon off;
master_process $master;
worker_processes $1;
error_log $TMP/vigil/logs/error.log notice;
pid $TMP/vigil/logs/vigil.pid;
events { worker_connections $WORKER_CONNECTIONS; }
http {
    access_log off;
    sendfile on;
    server {
        $TLS_BLOCK
    }
}
EOF
}

wait_port() {
  for _ in $(seq 1 100); do
    if (exec 3<>/dev/tcp/127.0.0.1/"$PORT") 2>/dev/null; then return 0; fi
    sleep 0.05
  done
  echo "server did not come up on $PORT" >&2
  return 1
}

SERVER_PIDS=()
start_nginx() {  # workers
  nginx_conf "$1"
  if [[ $1 == 1 ]]; then
    taskset -c 0 "$NGINX" -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" -g 'daemon off; master_process off;' &
  else
    "$NGINX" -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" -g 'daemon off;' &
  fi
  SERVER_PIDS=($!)
  PIDS+=($!)
  wait_port
}

start_vigil() {  # workers
  vigil_conf "$1"
  if [[ $1 == 1 ]]; then
    taskset -c 0 "$VIGIL" -p "$TMP/vigil" -c conf/vigil.conf 2>>"$TMP/vigil/logs/stderr" &
  else
    "$VIGIL" -p "$TMP/vigil" -c conf/vigil.conf 2>>"$TMP/vigil/logs/stderr" &
  fi
  SERVER_PIDS=($!)
  PIDS+=($!)
  wait_port
}

stop_server() {
  for p in "${SERVER_PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  SERVER_PIDS=()
  sleep 0.3
}

# Connections per second from openssl s_time (MODE: -new or -reuse).
run_stime() {
  local mode=$1 out
  out=$(taskset -c 1 openssl s_time -connect "127.0.0.1:$PORT" "$mode" -tls1_3 \
    -time "$DURATION" -www /small.txt 2>&1)
  awk '/connections in [0-9.]+ real seconds/ {for (i = 1; i <= NF; i++) if ($i == "connections") n = $(i - 1); for (i = 1; i <= NF; i++) if ($i == "real") s = $(i - 1)} END {printf "%.0f\n", (s > 0 ? n / s : 0)}' <<<"$out"
}

run_wrk() {  # path
  local out
  out=$(taskset -c 1 wrk -t1 -c50 -d"${DURATION}s" "https://127.0.0.1:$PORT$1" 2>&1)
  if grep -q "Non-2xx\|Socket errors" <<<"$out"; then
    echo "wrk reported errors:" >&2
    grep "Non-2xx\|Socket errors" <<<"$out" >&2
  fi
  awk '/Requests\/sec/ {print $2}' <<<"$out"
}

measure() {  # case
  case $1 in
    new | new2) run_stime -new ;;
    resumed) run_stime -reuse ;;
    small | small2) run_wrk /small.txt ;;
    big) run_wrk /big.bin ;;
  esac
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

declare -A RESULT
bench_case() {  # name workers
  local name=$1 workers=$2 n_res=() v_res=()
  for r in $(seq 1 "$ROUNDS"); do
    start_nginx "$workers"
    DURATION=1 measure "$name" >/dev/null  # warm-up
    n_res+=("$(measure "$name")")
    stop_server
    start_vigil "$workers"
    DURATION=1 measure "$name" >/dev/null
    v_res+=("$(measure "$name")")
    stop_server
    echo "  $name round $r: nginx ${n_res[-1]}/s; vigil ${v_res[-1]}/s" >&2
  done
  RESULT[$name]="$(printf '%s\n' "${n_res[@]}" | median) $(printf '%s\n' "${v_res[@]}" | median)"
}

rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }

memory_case() {
  local out=()
  for server in nginx vigil; do
    "start_$server" 1
    local pid=${SERVER_PIDS[0]}
    curl -sk -o /dev/null "https://127.0.0.1:$PORT/small.txt"
    sleep 0.5
    local before after
    before=$(rss_kb "$pid")
    exec {fifo_w}> >(python3 "$ROOT/bench/load/idle_tls_clients.py" "$PORT" "$IDLE_CONNS" /small.txt > "$TMP/idle.out")
    for _ in $(seq 1 1200); do grep -q ready "$TMP/idle.out" 2>/dev/null && break; sleep 0.1; done
    sleep 0.5
    after=$(rss_kb "$pid")
    exec {fifo_w}>&-
    sleep 1
    local per
    per=$(awk -v a="$after" -v b="$before" -v n="$IDLE_CONNS" 'BEGIN {printf "%.0f", (a - b) * 1024 / n}')
    echo "  memory $server: RSS ${before} kB -> ${after} kB with $(cat "$TMP/idle.out") idle TLS connections: $per bytes each" >&2
    out+=("$per")
    stop_server
  done
  RESULT[memory]="${out[0]} ${out[1]}"
}

echo "vigil: $VIGIL; nginx: $($NGINX -v 2>&1 | sed 's/.*: //'); $(openssl version); ${ROUNDS} rounds of ${DURATION}s" >&2
for c in $CASES; do
  case $c in
    new | resumed | small | big) bench_case "$c" 1 ;;
    new2 | small2) bench_case "$c" 2 ;;
    memory) memory_case ;;
  esac
done

printf '\n| case | nginx | vigil | vigil/nginx |\n|---|---:|---:|---:|\n'
for c in $CASES; do
  read -r n v <<<"${RESULT[$c]}"
  case $c in
    new) label="new TLS 1.3 handshakes/s (s_time -new, 1 worker)" ;;
    resumed) label="resumed TLS 1.3 handshakes/s (s_time -reuse, 1 worker)" ;;
    small) label="keep-alive 12 B requests/s over TLS (wrk -c50, 1 worker)" ;;
    big) label="1 MiB file requests/s over TLS (wrk -c50, 1 worker)" ;;
    new2) label="new TLS 1.3 handshakes/s (s_time -new, 2 workers)" ;;
    small2) label="keep-alive 12 B requests/s over TLS (wrk -c50, 2 workers)" ;;
    memory) label="bytes per idle TLS connection ($IDLE_CONNS idle, lower is better)" ;;
  esac
  printf '| %s | %s | %s | %s |\n' "$label" "$n" "$v" "$(awk -v n="$n" -v v="$v" 'BEGIN {printf "%.2f", (n > 0 ? v / n : 0)}')"
done
