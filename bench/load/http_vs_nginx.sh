#!/usr/bin/env bash
# Vigil's static server against nginx, same machine, same files, equivalent
# configurations (access_log off, sendfile on, nginx's defaults otherwise),
# driven by wrk alternately: for each case and round, nginx, then Vigil on
# each backend in SERVERS (default: epoll and io_uring).
#
#   bench/load/http_vs_nginx.sh [ROUNDS [SECONDS]]      (default 3 rounds of 5 s)
#
# Environment: VIGIL (default build/release/vigil, built if missing), NGINX
# (default /usr/sbin/nginx), CASES (space-separated subset of: small50 small50x2
# small1000 small1000x2 big close syscalls memory), SERVERS (subset of: nginx
# epoll io_uring, and io_uring+VAR=value variants, see start_server, e.g.
# io_uring+VIGIL_URING_FILE=read). The syscalls case counts
# raw_syscalls:sys_enter of the server (perf stat, 1 worker, 50 keep-alive
# connections) per request of SYSCALLS_PATH (default /small.txt; /big.bin
# for the 1 MiB file).
# OPEN_FILE_CACHE=1 adds "open_file_cache max=1000 inactive=60s;" to both
# servers' http blocks (default: no cache, nginx's default).
#
# With one worker the server is pinned to CPU 0 and wrk to CPU 1; with two,
# both servers run a master and two workers sharing one listening socket
# (nginx's and Vigil's defaults: no accept_mutex, EPOLLEXCLUSIVE), unpinned.
# VIGIL_REUSEPORT_PROCESSES=1 instead runs two single-process Vigils with
# SO_REUSEPORT (and nginx with "listen ... reuseport"). The memory case opens
# 10,000 idle keep-alive connections (each after one request) and reports
# (RSS with them - RSS before) / 10,000 for the server process.
set -euo pipefail

ROUNDS=${1:-3}
DURATION=${2:-5}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=common.sh
. "$ROOT/bench/load/common.sh"
VIGIL=${VIGIL:-$ROOT/build/release/vigil}
NGINX=${NGINX:-/usr/sbin/nginx}
CASES=${CASES:-"small50 small50x2 small1000 small1000x2 big close syscalls memory"}
SERVERS=${SERVERS:-"nginx epoll io_uring"}
IDLE_CONNS=${IDLE_CONNS:-10000}
OFC_LINE=""
[[ -n ${OPEN_FILE_CACHE:-} && ${OPEN_FILE_CACHE} != 0 ]] && OFC_LINE="open_file_cache max=1000 inactive=60s;"

build_vigil_if_missing
require_tools "$NGINX" wrk taskset python3 /usr/bin/time

# 10,000 idle connections need that many descriptors in the server and in
# the client.
raise_nofile
make_bench_tmp vigil_bench

mkdir -p "$TMP/html" "$TMP/nginx/logs" "$TMP/vigil/logs" "$TMP/vigil/conf"
printf 'hello world\n' > "$TMP/html/small.txt"      # 12 bytes
head -c 1048576 /dev/urandom > "$TMP/html/big.bin"  # 1 MiB
PORT=$(free_port)

# The http block both servers get.
http_block() {  # reuseport
  cat <<EOF
http {
    access_log off;
    sendfile on;
    $OFC_LINE
    server {
        listen 127.0.0.1:$PORT $1;
        root $TMP/html;
    }
}
EOF
}

nginx_conf() {  # workers reuseport
  local workers=$1 reuse=$2
  {
    cat <<EOF
worker_processes $workers;
worker_rlimit_nofile $NOFILE;
error_log $TMP/nginx/logs/error.log error;
pid $TMP/nginx/logs/nginx.pid;
events { worker_connections $WORKER_CONNECTIONS; }
EOF
    http_block "$reuse"
  } > "$TMP/nginx/nginx.conf"
}

vigil_conf() {  # reuseport [workers]
  local reuse=$1 workers=${2:-1} master=off
  [[ $workers -gt 1 ]] && master=on
  {
    cat <<EOF
daemon off;
master_process $master;
worker_processes $workers;
error_log $TMP/vigil/logs/error.log notice;
pid $TMP/vigil/logs/vigil.pid;
events { worker_connections $WORKER_CONNECTIONS; use ${USE:-epoll}; }
EOF
    http_block "$reuse"
  } > "$TMP/vigil/conf/vigil.conf"
}

SERVER_PIDS=()
start_nginx() {  # workers
  local workers=$1 pin=()
  if [[ $workers == 1 ]]; then
    nginx_conf 1 ""
    pin=(taskset -c 0)
    "${pin[@]}" "$NGINX" -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" -g 'daemon off; master_process off;' &
  else
    nginx_conf "$workers" "${VIGIL_REUSEPORT_PROCESSES:+reuseport}"
    "$NGINX" -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" -g 'daemon off;' &
  fi
  SERVER_PIDS=($!)
  PIDS+=($!)
  wait_port "$PORT"
}

start_vigil() {  # workers
  local workers=$1
  SERVER_PIDS=()
  if [[ $workers == 1 ]]; then
    vigil_conf ""
    taskset -c 0 "$VIGIL" -p "$TMP/vigil" -c conf/vigil.conf 2>>"$TMP/vigil/logs/stderr" &
    SERVER_PIDS=($!)
    PIDS+=($!)
  elif [[ -z ${VIGIL_REUSEPORT_PROCESSES:-} ]]; then
    vigil_conf "" "$workers"
    "$VIGIL" -p "$TMP/vigil" -c conf/vigil.conf 2>>"$TMP/vigil/logs/stderr" &
    SERVER_PIDS=($!)
    PIDS+=($!)
  else
    vigil_conf reuseport
    for i in $(seq 1 "$workers"); do
      sed "s|pid .*;|pid $TMP/vigil/logs/vigil-$i.pid;|" "$TMP/vigil/conf/vigil.conf" > "$TMP/vigil/conf/vigil-$i.conf"
      "$VIGIL" -p "$TMP/vigil" -c "conf/vigil-$i.conf" 2>>"$TMP/vigil/logs/stderr" &
      SERVER_PIDS+=($!)
      PIDS+=($!)
    done
  fi
  wait_port "$PORT"
}


# run_wrk CONNS PATH [extra wrk args]: prints "requests/sec server-CPU-us/request".
# The second figure is what the server spent per request, which the other
# load on a shared machine disturbs much less than the rate.
run_wrk() {
  local conns=$1 path=$2
  shift 2
  local out t0 t1
  t0=$(server_ticks)
  # The client's CPU too: on loopback the sender's system calls also run the
  # receiver's TCP input (softirq), so a server can shift CPU to or from wrk.
  out=$(/usr/bin/time -f "CLIENTCPU %U %S" taskset -c 1 wrk -t1 -c"$conns" -d"${DURATION}s" "$@" "http://127.0.0.1:$PORT$path" 2>&1)
  t1=$(server_ticks)
  if grep -q "Non-2xx\|Socket errors" <<<"$out"; then
    echo "wrk reported errors:" >&2
    grep "Non-2xx\|Socket errors" <<<"$out" >&2
  fi
  local rps reqs
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  reqs=$(awk '/requests in/ {print $1}' <<<"$out")
  local client
  client=$(awk '/CLIENTCPU/ {print $2 + $3}' <<<"$out")
  awk -v r="$rps" -v n="$reqs" -v t=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" -v w="${client:-0}" \
    'BEGIN {printf "%s %.2f %.2f\n", r, (n > 0 ? t * 1e6 / hz / n : 0), (n > 0 ? w * 1e6 / n : 0)}'
}

# server workers: nginx, or vigil on that backend; "io_uring+VAR=value[+...]"
# runs vigil on io_uring with that environment (A/B runs of one binary, e.g.
# SERVERS="io_uring io_uring+VIGIL_URING_ACCEPT=poll").
start_server() {
  if [[ $1 == nginx ]]; then start_nginx "$2"; return; fi
  local envs=() e
  [[ $1 == *+* ]] && IFS=+ read -r -a envs <<<"${1#*+}"
  for e in "${envs[@]}"; do export "${e?}"; done
  USE=${1%%+*} start_vigil "$2"
  for e in "${envs[@]}"; do unset "${e%%=*}"; done
}

declare -A RESULT CPU CLIENT
bench_case() {  # name workers conns path [wrk args]
  local name=$1 workers=$2 conns=$3 path=$4
  shift 4
  declare -A res=() cpu=() client=()
  local line srv msg
  for r in $(seq 1 "$ROUNDS"); do
    msg="  $name round $r:"
    for srv in $SERVERS; do
      start_server "$srv" "$workers"
      DURATION=1 run_wrk 10 "$path" "$@" >/dev/null  # warm-up
      line=$(run_wrk "$conns" "$path" "$@")
      read -r l_rps l_cpu l_client <<<"$line"
      res[$srv]+="$l_rps "
      cpu[$srv]+="$l_cpu "
      client[$srv]+="$l_client "
      stop_server
      msg+=" $srv $l_rps req/s $l_cpu us/req (wrk $l_client);"
    done
    echo "$msg" >&2
  done
  for srv in $SERVERS; do
    RESULT[$name,$srv]=$(median_of "${res[$srv]}")
    CPU[$name,$srv]=$(median_of "${cpu[$srv]}")
    CLIENT[$name,$srv]=$(median_of "${client[$srv]}")
  done
}

# Server syscalls per request: perf stat on the (single) server process for
# the length of one wrk run (plus a second around it), 50 keep-alive
# connections, 1 worker.
syscalls_case() {
  command -v perf >/dev/null || { echo "  syscalls: perf missing, skipped" >&2; return; }
  local srv out reqs calls perf_pid
  for srv in $SERVERS; do
    start_server "$srv" 1
    DURATION=1 run_wrk 10 "${SYSCALLS_PATH:-/small.txt}" >/dev/null
    perf stat -e raw_syscalls:sys_enter -x, -o "$TMP/perf.out" -p "${SERVER_PIDS[0]}" \
      -- sleep "$((DURATION + 1))" &
    perf_pid=$!
    sleep 0.5
    out=$(taskset -c 1 wrk -t1 -c50 -d"${DURATION}s" "http://127.0.0.1:$PORT${SYSCALLS_PATH:-/small.txt}" 2>&1)
    wait "$perf_pid" || true
    stop_server
    reqs=$(awk '/requests in/ {print $1}' <<<"$out")
    calls=$(awk -F, '/raw_syscalls/ {print $1}' "$TMP/perf.out")
    RESULT[syscalls,$srv]=$(awk -v c="$calls" -v n="$reqs" 'BEGIN {printf "%.2f", (n > 0 ? c / n : 0)}')
    echo "  syscalls $srv: $calls syscalls for $reqs requests" >&2
  done
}

memory_case() {
  local out=()
  for server in nginx vigil; do
    USE=epoll "start_$server" 1
    curl -s -o /dev/null "http://127.0.0.1:$PORT/small.txt"
    sleep 0.5
    idle_bytes_per_conn "memory $server" "${SERVER_PIDS[0]}" idle_clients.py 600 "idle connections"
    out+=("$IDLE_BYTES")
    stop_server
  done
  RESULT[memory,nginx]=${out[0]}
  RESULT[memory,epoll]=${out[1]}
}

echo "vigil: $VIGIL; nginx: $($NGINX -v 2>&1 | sed 's/.*: //'); ${ROUNDS} rounds of ${DURATION}s; nofile $NOFILE; servers: $SERVERS${OFC_LINE:+; $OFC_LINE}" >&2
for c in $CASES; do
  case $c in
    small50) bench_case small50 1 50 /small.txt ;;
    small50x2) bench_case small50x2 2 50 /small.txt ;;
    small1000) bench_case small1000 1 1000 /small.txt ;;
    small1000x2) bench_case small1000x2 2 1000 /small.txt ;;
    big) bench_case big 1 50 /big.bin ;;
    close) bench_case close 1 50 /small.txt -H "Connection: close" ;;
    syscalls) syscalls_case ;;
    memory) memory_case ;;
  esac
done

# Medians of the rounds; ratios against nginx and, for io_uring, against epoll.
has() { [[ " $SERVERS " == *" $1 "* ]]; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0 && a > 0) printf "%.2f", a / b; else print "-"}'; }
header="| case |"
rule="|---|"
for srv in $SERVERS; do header+=" $srv |"; rule+="---:|"; done
has epoll && has nginx && { header+=" epoll/nginx |"; rule+="---:|"; }
has io_uring && has nginx && { header+=" io_uring/nginx |"; rule+="---:|"; }
has io_uring && has epoll && { header+=" io_uring/epoll |"; rule+="---:|"; }
header+=" server CPU us/req ($SERVERS) | wrk CPU us/req ($SERVERS) |"
rule+="---:|---:|"
printf '\n%s\n%s\n' "$header" "$rule"
for c in $CASES; do
  case $c in
    small50) label="12 B file, 50 keep-alive conns, 1 worker (req/s)" ;;
    small50x2) label="12 B file, 50 keep-alive conns, 2 workers (req/s)" ;;
    small1000) label="12 B file, 1,000 keep-alive conns, 1 worker (req/s)" ;;
    small1000x2) label="12 B file, 1,000 keep-alive conns, 2 workers (req/s)" ;;
    big) label="1 MiB file, 50 keep-alive conns, 1 worker (req/s)" ;;
    close) label="12 B file, new connection per request, 50 conns (req/s)" ;;
    syscalls) label="server syscalls per request (lower is better)" ;;
    memory) label="RSS per idle keep-alive connection, $IDLE_CONNS conns (bytes; lower is better)" ;;
  esac
  row="| $label |"
  for srv in $SERVERS; do row+=" ${RESULT[$c,$srv]:--} |"; done
  n=${RESULT[$c,nginx]:-0} e=${RESULT[$c,epoll]:-0} u=${RESULT[$c,io_uring]:-0}
  has epoll && has nginx && row+=" $(ratio "$e" "$n") |"
  has io_uring && has nginx && row+=" $(ratio "$u" "$n") |"
  has io_uring && has epoll && row+=" $(ratio "$u" "$e") |"
  cpu=""
  for srv in $SERVERS; do cpu+="${CPU[$c,$srv]:--} / "; done
  row+=" ${cpu% / } |"
  cpu=""
  for srv in $SERVERS; do cpu+="${CLIENT[$c,$srv]:--} / "; done
  row+=" ${cpu% / } |"
  echo "$row"
done
