#!/usr/bin/env bash
# Vigil's HTTPS against nginx's, same machine, same certificates (ECDSA P-256
# and RSA 2048 on one server, the client picks ECDSA), same ciphers (OpenSSL's
# TLS 1.3 defaults; "HIGH:!aNULL:!MD5" for 1.2), same files, alternating
# rounds (nginx, then Vigil), medians reported.
#
#   bench/load/tls_vs_nginx.sh [ROUNDS [SECONDS]]      (default 3 rounds of 5 s)
#
# Cases (CASES, space-separated subset):
#   new        new TLS 1.3 handshakes/s: STIME_CLIENTS (4) parallel
#              `openssl s_time -new -tls1_3`, one request (12 bytes) per
#              connection
#   resumed    resumed handshakes/s: the same with -reuse (TLS 1.3 tickets)
#   small      keep-alive 12-byte requests over TLS: wrk -c50
#   big        a 1 MiB file over TLS: wrk -c50
#   new2 small2 the same with two workers (master + 2 workers, unpinned)
#   memory     bytes per idle TLS connection: (RSS with N idle - RSS before)/N,
#              N = IDLE_CONNS (5,000), one request on each first
# With one worker the server is pinned to CPU 0 and the clients to CPU 1.
#
# Every case also reports the server's CPU time per operation (handshake or
# request), read from /proc/<pid>/stat of the server and its workers, and how
# busy the server was (CPU time / wall time). On a shared machine that figure
# moves much less than the rate. A handshake costs `openssl s_time` about
# twice what it costs the server, so with one core for the clients the
# handshake rates are bounded by the clients (the server stays well below
# 100% busy): there, CPU per handshake is the figure that compares the
# servers. wrk is no help for new handshakes: it resumes its sessions when it
# reconnects. s_time runs with -no-CAfile -no-CApath -no-CAstore, otherwise
# each connection scans the system's certificate directory.
#
# Environment: VIGIL (default build/release/vigil), NGINX (/usr/sbin/nginx),
# CASES, IDLE_CONNS, STIME_CLIENTS. VIGIL_BEFORE=<another vigil binary> adds
# it as a third server ("before") to every round and to the table, to compare
# a change with what it replaces under the same load.
set -euo pipefail

ROUNDS=${1:-3}
DURATION=${2:-5}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VIGIL=${VIGIL:-$ROOT/build/release/vigil}
VIGIL_BEFORE=${VIGIL_BEFORE:-}
SERVERS="nginx vigil"
[[ -n $VIGIL_BEFORE ]] && SERVERS+=" before"
NGINX=${NGINX:-/usr/sbin/nginx}
CASES=${CASES:-"new resumed small big new2 small2 memory"}
IDLE_CONNS=${IDLE_CONNS:-5000}
STIME_CLIENTS=${STIME_CLIENTS:-4}

# shellcheck source=common.sh
. "$ROOT/bench/load/common.sh"
build_vigil_if_missing
require_tools "$NGINX" wrk openssl taskset python3 curl pgrep

raise_nofile
make_bench_tmp vigil_tls_bench

mkdir -p "$TMP/html" "$TMP/nginx/logs" "$TMP/vigil/logs" "$TMP/vigil/conf" "$TMP/certs"
printf 'hello world\n' > "$TMP/html/small.txt"      # 12 bytes
head -c 1048576 /dev/urandom > "$TMP/html/big.bin"  # 1 MiB
make_test_certs "$TMP/certs"
PORT=$(free_port)

# The http block both servers get.
HTTP_BLOCK="http {
    access_log off;
    sendfile on;
    server {
        $(tls_server_block "$PORT" "$TMP/html" "$TMP/certs")
    }
}"

nginx_conf() {  # workers
  cat > "$TMP/nginx/nginx.conf" <<EOF
worker_processes $1;
worker_rlimit_nofile $NOFILE;
error_log $TMP/nginx/logs/error.log error;
pid $TMP/nginx/logs/nginx.pid;
events { worker_connections $WORKER_CONNECTIONS; }
$HTTP_BLOCK
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
$HTTP_BLOCK
EOF
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
  wait_port "$PORT"
}

start_vigil() {  # workers [binary]
  local bin=${2:-$VIGIL}
  vigil_conf "$1"
  if [[ $1 == 1 ]]; then
    taskset -c 0 "$bin" -p "$TMP/vigil" -c conf/vigil.conf 2>>"$TMP/vigil/logs/stderr" &
  else
    "$bin" -p "$TMP/vigil" -c conf/vigil.conf 2>>"$TMP/vigil/logs/stderr" &
  fi
  SERVER_PIDS=($!)
  PIDS+=($!)
  wait_port "$PORT"
}

start_before() { start_vigil "$1" "$VIGIL_BEFORE"; }


now() { date +%s.%N; }

# "ops/s server-CPU-us/op server-busy-%" from an operation count, the server's
# ticks and the wall clock around the run.
report() {  # ops ticks wall0 wall1
  awk -v n="$1" -v t="$2" -v w0="$3" -v w1="$4" -v hz="$(getconf CLK_TCK)" \
    'BEGIN {w = w1 - w0; printf "%.0f %.1f %.0f\n", (w > 0 ? n / w : 0), (n > 0 ? t * 1e6 / hz / n : 0), (w > 0 ? t * 100 / hz / w : 0)}'
}

CLIENT_PIN=()
# STIME_CLIENTS parallel s_time processes (MODE: -new or -reuse), the
# connections of all of them over the wall time of the run. One s_time waits
# for each answer before it goes on, so one alone leaves the server idle
# between its round trips.
run_stime() {
  local mode=$1 t0 t1 w0 w1 i n
  local pids=()
  t0=$(server_ticks)
  w0=$(now)
  for i in $(seq 1 "$STIME_CLIENTS"); do
    "${CLIENT_PIN[@]}" openssl s_time -connect "127.0.0.1:$PORT" "$mode" -tls1_3 -time "$DURATION" \
      -www /small.txt -no-CAfile -no-CApath -no-CAstore >"$TMP/stime.$i" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}" || true
  w1=$(now)
  t1=$(server_ticks)
  n=$(cat "$TMP"/stime.* | awk '/connections in [0-9.]+ real seconds/ {s += $1} END {print s + 0}')
  rm -f "$TMP"/stime.*
  report "$n" $((t1 - t0)) "$w0" "$w1"
}

run_wrk() {  # path
  local out t0 t1 w0 w1 n
  t0=$(server_ticks)
  w0=$(now)
  out=$("${CLIENT_PIN[@]}" wrk -t1 -c50 -d"${DURATION}s" "https://127.0.0.1:$PORT$1" 2>&1)
  w1=$(now)
  t1=$(server_ticks)
  if grep -q "Non-2xx\|Socket errors" <<<"$out"; then
    echo "wrk reported errors:" >&2
    grep "Non-2xx\|Socket errors" <<<"$out" >&2
  fi
  n=$(awk '/requests in/ {print $1}' <<<"$out")
  # wrk's own rate (requests over its run), the server's CPU over ours.
  report "$n" $((t1 - t0)) "$w0" "$w1" | awk -v r="$(awk '/Requests\/sec/ {print $2}' <<<"$out")" '{printf "%.0f %s %s\n", r, $2, $3}'
}

measure() {  # case
  case $1 in
    new | new2) run_stime -new ;;
    resumed) run_stime -reuse ;;
    small | small2) run_wrk /small.txt ;;
    big) run_wrk /big.bin ;;
  esac
}

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

declare -A RESULT CPU BUSY LOAD
bench_case() {  # name workers
  local name=$1 workers=$2 srv line r
  declare -A res=() cpu=() busy=()
  CLIENT_PIN=()
  [[ $workers == 1 ]] && CLIENT_PIN=(taskset -c 1)
  LOAD[$name]="$(loadavg)"
  for r in $(seq 1 "$ROUNDS"); do
    local msg="  $name round $r (load $(loadavg)):"
    for srv in $SERVERS; do
      "start_$srv" "$workers"
      DURATION=1 measure "$name" >/dev/null  # warm-up
      line=$(measure "$name")
      stop_server
      read -r rate us pct <<<"$line"
      res[$srv]+="$rate "
      cpu[$srv]+="$us "
      busy[$srv]+="$pct "
      msg+=" $srv $rate/s ${us} us/op ${pct}% busy;"
    done
    echo "$msg" >&2
  done
  LOAD[$name]+=" .. $(loadavg)"
  for srv in $SERVERS; do
    RESULT[$name,$srv]=$(median_of "${res[$srv]}")
    CPU[$name,$srv]=$(median_of "${cpu[$srv]}")
    BUSY[$name,$srv]=$(median_of "${busy[$srv]}")
  done
}

memory_case() {
  local server
  for server in $SERVERS; do
    "start_$server" 1
    curl -sk -o /dev/null "https://127.0.0.1:$PORT/small.txt"
    sleep 0.5
    idle_bytes_per_conn "memory $server" "${SERVER_PIDS[0]}" idle_tls_clients.py 1200 "idle TLS connections"
    RESULT[memory,$server]=$IDLE_BYTES
    stop_server
  done
}

echo "vigil: $VIGIL; nginx: $($NGINX -v 2>&1 | sed 's/.*: //'); $(openssl version); ${ROUNDS} rounds of ${DURATION}s; $STIME_CLIENTS s_time clients; load average $(loadavg)" >&2
for c in $CASES; do
  case $c in
    new | resumed | small | big) bench_case "$c" 1 ;;
    new2 | small2) bench_case "$c" 2 ;;
    memory) LOAD[memory]="$(loadavg)"; memory_case ;;
  esac
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a > 0 && b > 0) printf "%.2f", a / b; else print "-"}'; }
slash() {  # ARRAY-NAME case: "nginx / vigil [/ before]"
  local -n arr=$1
  local out="" srv
  for srv in $SERVERS; do out+="${arr[$2,$srv]:--} / "; done
  echo "${out% / }"
}
B=""
[[ -n $VIGIL_BEFORE ]] && B=" before |"
printf '\n| case | nginx | vigil |%s vigil/nginx | server CPU us/op (%s) | nginx/vigil CPU | server busy %% (%s) | load average (start .. end) |\n' "$B" "${SERVERS// / \/ }" "${SERVERS// / \/ }"
printf '|---|---:|---:|%s---:|---:|---:|---:|---|\n' "${B:+---:|}"
for c in $CASES; do
  case $c in
    new) label="new TLS 1.3 handshakes/s ($STIME_CLIENTS x s_time -new, 1 worker)" ;;
    resumed) label="resumed TLS 1.3 handshakes/s ($STIME_CLIENTS x s_time -reuse, 1 worker)" ;;
    small) label="keep-alive 12 B requests/s over TLS (wrk -c50, 1 worker)" ;;
    big) label="1 MiB file requests/s over TLS (wrk -c50, 1 worker)" ;;
    new2) label="new TLS 1.3 handshakes/s ($STIME_CLIENTS x s_time -new, 2 workers)" ;;
    small2) label="keep-alive 12 B requests/s over TLS (wrk -c50, 2 workers)" ;;
    memory) label="bytes per idle TLS connection ($IDLE_CONNS idle, lower is better)" ;;
  esac
  n=${RESULT[$c,nginx]:-0} v=${RESULT[$c,vigil]:-0}
  row="| $label | $n | $v |"
  [[ -n $VIGIL_BEFORE ]] && row+=" ${RESULT[$c,before]:--} |"
  row+=" $(ratio "$v" "$n") |"
  if [[ $c == memory ]]; then
    row+=" - | - | - | ${LOAD[$c]} |"
  else
    row+=" $(slash CPU "$c") | $(ratio "${CPU[$c,nginx]}" "${CPU[$c,vigil]}") | $(slash BUSY "$c") | ${LOAD[$c]} |"
  fi
  echo "$row"
done
