#!/usr/bin/env bash
# Vigil's mail proxy against nginx 1.22's (Debian's libnginx-mod-mail), IMAP,
# each with one process (master_process off, one worker) in front of the same
# backend and the same auth_http server, alternating proxies within each
# round (the order rotates every round), several rounds, medians.
#
#   bench/load/mail_vs_nginx.sh [ROUNDS [SECONDS [CONCURRENCY [IDLE]]]]
#                                     (default 5 rounds of 10 s, 1000, 1000)
#
# A session: greeting, LOGIN (-> one auth_http request, a backend connection
# and the proxy's login there), SELECT, FETCH 1 BODY[] (100 KiB), LOGOUT,
# close; CONCURRENCY sessions at a time, a new one as soon as one ends
# (bench/load/mail_load.py client). Reported per proxy:
#   sessions/s      completed sessions over the run
#   CPU us/session  utime+stime of the proxy process (/proc/PID/stat) over
#                   the run, divided by the sessions completed
#   idle bytes      RSS growth of the proxy process with IDLE logged-in,
#                   relayed and idle sessions open, divided by IDLE
# The peers: the IMAP backend is mail_load.py (asyncio, uvloop when
# installed); the auth_http server is a separate nginx (http, `return 200`
# with the Auth-* headers). With PIN=1 (default) the proxy runs on CPU 0 and
# the peers on CPU 1, niced; the script prints each side's CPU use so that a
# bottleneck in the peers shows.
#
# Environment: VIGIL (default build/release/vigil), NGINX (/usr/sbin/nginx),
# NGINX_MAIL_MODULE (/usr/lib/nginx/modules/ngx_mail_module.so), PIN (1),
# PERF=FILE to record each proxy's measured runs with perf into FILE.<proxy>,
# STRACE=FILE to count their system calls (strace -c) into FILE.<proxy>.
set -euo pipefail

ROUNDS=${1:-5}
DURATION=${2:-10}
CONC=${3:-1000}
IDLE_CONNS=${4:-1000}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VIGIL=${VIGIL:-$ROOT/build/release/vigil}
NGINX=${NGINX:-/usr/sbin/nginx}
NGINX_MAIL_MODULE=${NGINX_MAIL_MODULE:-/usr/lib/nginx/modules/ngx_mail_module.so}
LOAD=$ROOT/bench/load/mail_load.py

# shellcheck source=common.sh
. "$ROOT/bench/load/common.sh"
build_vigil_if_missing
require_tools "$NGINX" python3 taskset
[[ -r $NGINX_MAIL_MODULE ]] || { echo "missing $NGINX_MAIL_MODULE (apt-get install libnginx-mod-mail)" >&2; exit 1; }

raise_nofile
make_bench_tmp vigil_mail_bench
PIN_PROXY=() PIN_PEERS=()
if [[ ${PIN:-1} == 1 ]]; then PIN_PROXY=(taskset -c 0); PIN_PEERS=(nice -n 5 taskset -c 1); fi

BACKEND_PORT=$(free_port)
AUTH_PORT=$(free_port)
PORT=$(free_port)
mkdir -p "$TMP/auth/logs" "$TMP/nginx/logs" "$TMP/vigil/logs" "$TMP/vigil/conf"

# ---- the peers -----------------------------------------------------------
"${PIN_PEERS[@]}" python3 "$LOAD" backend "$BACKEND_PORT" > "$TMP/backend.out" &
BACKEND_PID=$!
PIDS+=($!)
cat > "$TMP/auth/nginx.conf" <<EOF
user root;
worker_processes 1;
error_log $TMP/auth/logs/error.log error;
pid $TMP/auth/logs/nginx.pid;
worker_rlimit_nofile $NOFILE;
events { worker_connections $WORKER_CONNECTIONS; }
http {
    access_log off;
    server {
        listen 127.0.0.1:$AUTH_PORT backlog=4096;
        location = /auth {
            add_header Auth-Status OK;
            add_header Auth-Server 127.0.0.1;
            add_header Auth-Port $BACKEND_PORT;
            return 200 "";
        }
    }
}
EOF
"${PIN_PEERS[@]}" "$NGINX" -p "$TMP/auth" -c "$TMP/auth/nginx.conf" -g 'daemon off; master_process off;' &
AUTH_PID=$!
PIDS+=($!)
wait_port "$BACKEND_PORT"
wait_port "$AUTH_PORT"

# ---- the proxies -----------------------------------------------------------
# The same mail block for both (the directives mean the same to each).
mail_block() {
  cat <<EOF
mail {
    auth_http 127.0.0.1:$AUTH_PORT/auth;
    server_name bench.test;
    server {
        listen 127.0.0.1:$PORT backlog=4096;
        protocol imap;
        imap_auth plain;
        timeout 60s;
    }
}
EOF
}
cat > "$TMP/nginx/nginx.conf" <<EOF
load_module $NGINX_MAIL_MODULE;
user root;
error_log $TMP/nginx/logs/error.log error;
pid $TMP/nginx/logs/nginx.pid;
worker_rlimit_nofile $NOFILE;
events { worker_connections $WORKER_CONNECTIONS; }
$(mail_block)
EOF
cat > "$TMP/vigil/conf/vigil.conf" <<EOF
daemon off;
master_process off;
error_log $TMP/vigil/logs/error.log error;
pid $TMP/vigil/logs/vigil.pid;
worker_rlimit_nofile $NOFILE;
events { worker_connections $WORKER_CONNECTIONS; }
$(mail_block)
EOF

PROXY_PID= PROXY_NAME=
start_proxy() {
  PROXY_NAME=$1
  case $1 in
    nginx) "${PIN_PROXY[@]}" "$NGINX" -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" -g 'daemon off; master_process off;' & ;;
    vigil) "${PIN_PROXY[@]}" "$VIGIL" -p "$TMP/vigil" -c conf/vigil.conf 2>>"$TMP/vigil/logs/stderr" & ;;
  esac
  PROXY_PID=$!
  PIDS+=($!)
  wait_port "$PORT"
}
HZ=$(getconf CLK_TCK)

# run_load: "sessions/s cpu-us/session failed peers-cpu-%" for one run.
run_load() {
  local t0 b0 a0 t1 b1 a1 out
  local perf_pid=
  if [[ -n ${PERF:-} && $DURATION -gt 1 ]]; then
    perf record -g -o "$PERF.$PROXY_NAME" -p "$PROXY_PID" 2>/dev/null &
    perf_pid=$!
  elif [[ -n ${STRACE:-} && $DURATION -gt 1 ]]; then
    strace -c -f -o "$STRACE.$PROXY_NAME" -p "$PROXY_PID" 2>/dev/null &
    perf_pid=$!
  fi
  t0=$(pid_ticks "$PROXY_PID") b0=$(pid_ticks "$BACKEND_PID") a0=$(pid_ticks "$AUTH_PID")
  out=$("${PIN_PEERS[@]}" python3 "$LOAD" client "$PORT" "$CONC" "$DURATION")
  [[ -z $perf_pid ]] || { kill -INT "$perf_pid"; wait "$perf_pid" || true; }
  t1=$(pid_ticks "$PROXY_PID") b1=$(pid_ticks "$BACKEND_PID") a1=$(pid_ticks "$AUTH_PID")
  # "sessions N failed F seconds S cpu C"
  read -r _ n _ f _ secs _ ccpu <<<"$out"
  awk -v n="$n" -v f="$f" -v s="$secs" -v t=$((t1 - t0)) -v p=$((b1 - b0 + a1 - a0)) -v hz="$HZ" -v c="$ccpu" \
    'BEGIN {printf "%.0f %.1f %d %.0f %.0f %.0f\n", n / s, (n > 0 ? t * 1e6 / hz / n : 0), f, p * 100 / hz / s, t * 100 / hz / s, c * 100 / s}'
}

# idle_bytes: RSS growth of the proxy per idle relayed session.
idle_bytes() {
  local before after fifo_w
  before=$(rss_kb "$PROXY_PID")
  rm -f "$TMP/idle.out"
  exec {fifo_w}> >("${PIN_PEERS[@]}" python3 "$LOAD" idle "$PORT" "$IDLE_CONNS" > "$TMP/idle.out")
  for _ in $(seq 1 600); do grep -q ready "$TMP/idle.out" 2>/dev/null && break; sleep 0.1; done
  sleep 0.5
  after=$(rss_kb "$PROXY_PID")
  exec {fifo_w}>&-
  local held
  held=$(awk '{print $2}' "$TMP/idle.out")
  [[ $held == "$IDLE_CONNS" ]] || echo "  only ${held:-0} of $IDLE_CONNS idle sessions logged in" >&2
  awk -v a="$after" -v b="$before" -v n="${held:-0}" 'BEGIN {printf "%.0f", (n > 0 ? (a - b) * 1024 / n : 0)}'
  sleep 1
}

echo "vigil: $VIGIL; nginx: $($NGINX -v 2>&1 | sed 's/.*: //'); $ROUNDS rounds of ${DURATION}s," \
  "$CONC concurrent sessions, $IDLE_CONNS idle; pinned: ${PIN:-1}" >&2
declare -A R_SPS R_CPU R_IDLE
order=(nginx vigil)
for round in $(seq 1 "$ROUNDS"); do
  msg="  round $round:"
  for p in "${order[@]}"; do
    start_proxy "$p"
    idle=$(idle_bytes)  # first, on a fresh process
    DURATION=1 CONC=50 run_load >/dev/null  # warm-up
    read -r sps cpu failed peers proxy_pct client_pct <<<"$(run_load)"
    stop_proxy
    R_SPS[$p]+="$sps " R_CPU[$p]+="$cpu " R_IDLE[$p]+="$idle "
    msg+=" $p $sps sessions/s ${cpu}us/session (CPU: proxy ${proxy_pct}%, backend+auth ${peers}%, client ${client_pct}%; failed $failed) idle ${idle}B;"
  done
  echo "$msg" >&2
  order=("${order[@]:1}" "${order[0]}")
done

printf '\n| proxy | sessions/s | proxy CPU us/session | bytes per idle session |\n|---|---|---|---|\n'
for p in nginx vigil; do
  printf '| %s | %s | %s | %s |\n' "$p" "$(median_of "${R_SPS[$p]}")" "$(median_of "${R_CPU[$p]}")" \
    "$(median_of "${R_IDLE[$p]}")"
done
