#!/usr/bin/env bash
# Vigil's static server against nginx, same machine, same files, equivalent
# configurations (access_log off, sendfile on, nginx's defaults otherwise),
# driven by wrk alternately: for each case and round, nginx then Vigil.
#
#   bench/load/http_vs_nginx.sh [ROUNDS [SECONDS]]      (default 3 rounds of 5 s)
#
# Environment: VIGIL (default build/release/vigil, built if missing), NGINX
# (default /usr/sbin/nginx), CASES (space-separated subset of: small50 small50x2
# small1000 big close memory).
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
VIGIL=${VIGIL:-$ROOT/build/release/vigil}
NGINX=${NGINX:-/usr/sbin/nginx}
CASES=${CASES:-"small50 small50x2 small1000 big close memory"}
IDLE_CONNS=${IDLE_CONNS:-10000}

if [[ ! -x $VIGIL ]]; then
  echo "building $VIGIL" >&2
  (cd "$ROOT" && cmake --preset release >/dev/null && cmake --build --preset release -j2 --target vigil >/dev/null)
fi
for tool in "$NGINX" wrk taskset python3; do
  command -v "$tool" >/dev/null || { echo "missing $tool" >&2; exit 1; }
done

# Raise the descriptor limit as far as the hard limit allows (10,000 idle
# connections need that many descriptors in the server and in the client).
ulimit -n "$(ulimit -Hn)"
NOFILE=$(ulimit -n)
WORKER_CONNECTIONS=$((NOFILE - 100))

TMP=$(mktemp -d /tmp/vigil_bench.XXXXXX)
# nginx's workers (master_process on) run as "nobody": the files must be readable.
chmod 755 "$TMP"
PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [[ -n $p ]] && kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [[ -n ${KEEP_TMP:-} ]] || rm -rf "$TMP"
}
trap cleanup EXIT

mkdir -p "$TMP/html" "$TMP/nginx/logs" "$TMP/vigil/logs" "$TMP/vigil/conf"
printf 'hello world\n' > "$TMP/html/small.txt"      # 12 bytes
head -c 1048576 /dev/urandom > "$TMP/html/big.bin"  # 1 MiB
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

nginx_conf() {  # workers reuseport
  local workers=$1 reuse=$2
  cat > "$TMP/nginx/nginx.conf" <<EOF
worker_processes $workers;
worker_rlimit_nofile $NOFILE;
error_log $TMP/nginx/logs/error.log error;
pid $TMP/nginx/logs/nginx.pid;
events { worker_connections $WORKER_CONNECTIONS; }
http {
    access_log off;
    sendfile on;
    server {
        listen 127.0.0.1:$PORT $reuse;
        root $TMP/html;
    }
}
EOF
}

vigil_conf() {  # reuseport [workers]
  local reuse=$1 workers=${2:-1} master=off
  [[ $workers -gt 1 ]] && master=on
  cat > "$TMP/vigil/conf/vigil.conf" <<EOF
daemon off;
master_process $master;
worker_processes $workers;
error_log $TMP/vigil/logs/error.log notice;
pid $TMP/vigil/logs/vigil.pid;
events { worker_connections $WORKER_CONNECTIONS; }
http {
    access_log off;
    sendfile on;
    server {
        listen 127.0.0.1:$PORT $reuse;
        root $TMP/html;
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
  wait_port
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
  wait_port
}

stop_server() {
  for p in "${SERVER_PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  SERVER_PIDS=()
  sleep 0.3
}

# CPU time (clock ticks) used so far by the server processes and their children.
server_ticks() {
  local total=0 p
  for p in "${SERVER_PIDS[@]}" $(for q in "${SERVER_PIDS[@]}"; do pgrep -P "$q" || true; done); do
    [[ -r /proc/$p/stat ]] || continue
    total=$((total + $(awk '{print $14 + $15}' "/proc/$p/stat")))
  done
  echo "$total"
}

# run_wrk CONNS PATH [extra wrk args]: prints "requests/sec server-CPU-us/request".
# The second figure is what the server spent per request, which the other
# load on a shared machine disturbs much less than the rate.
run_wrk() {
  local conns=$1 path=$2
  shift 2
  local out t0 t1
  t0=$(server_ticks)
  out=$(taskset -c 1 wrk -t1 -c"$conns" -d"${DURATION}s" "$@" "http://127.0.0.1:$PORT$path" 2>&1)
  t1=$(server_ticks)
  if grep -q "Non-2xx\|Socket errors" <<<"$out"; then
    echo "wrk reported errors:" >&2
    grep "Non-2xx\|Socket errors" <<<"$out" >&2
  fi
  local rps reqs
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  reqs=$(awk '/requests in/ {print $1}' <<<"$out")
  awk -v r="$rps" -v n="$reqs" -v t=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" \
    'BEGIN {printf "%s %.2f\n", r, (n > 0 ? t * 1e6 / hz / n : 0)}'
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

declare -A RESULT CPU
bench_case() {  # name workers conns path [wrk args]
  local name=$1 workers=$2 conns=$3 path=$4
  shift 4
  local n_res=() v_res=() n_cpu=() v_cpu=() line
  for r in $(seq 1 "$ROUNDS"); do
    start_nginx "$workers"
    DURATION=1 run_wrk 10 "$path" "$@" >/dev/null  # warm-up
    line=$(run_wrk "$conns" "$path" "$@")
    n_res+=("${line% *}")
    n_cpu+=("${line#* }")
    stop_server
    start_vigil "$workers"
    DURATION=1 run_wrk 10 "$path" "$@" >/dev/null
    line=$(run_wrk "$conns" "$path" "$@")
    v_res+=("${line% *}")
    v_cpu+=("${line#* }")
    stop_server
    echo "  $name round $r: nginx ${n_res[-1]} req/s ${n_cpu[-1]} us/req; vigil ${v_res[-1]} req/s ${v_cpu[-1]} us/req" >&2
  done
  RESULT[$name]="$(printf '%s\n' "${n_res[@]}" | median) $(printf '%s\n' "${v_res[@]}" | median)"
  CPU[$name]="$(printf '%s\n' "${n_cpu[@]}" | median) $(printf '%s\n' "${v_cpu[@]}" | median)"
}

rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }

memory_case() {
  local out=()
  for server in nginx vigil; do
    "start_$server" 1
    local pid=${SERVER_PIDS[0]}
    curl -s -o /dev/null "http://127.0.0.1:$PORT/small.txt"
    sleep 0.5
    local before after
    before=$(rss_kb "$pid")
    exec {fifo_w}> >(python3 "$ROOT/bench/load/idle_clients.py" "$PORT" "$IDLE_CONNS" /small.txt > "$TMP/idle.out")
    for _ in $(seq 1 600); do grep -q ready "$TMP/idle.out" 2>/dev/null && break; sleep 0.1; done
    sleep 0.5
    after=$(rss_kb "$pid")
    exec {fifo_w}>&-
    sleep 1
    local per
    per=$(awk -v a="$after" -v b="$before" -v n="$IDLE_CONNS" 'BEGIN {printf "%.0f", (a - b) * 1024 / n}')
    echo "  memory $server: RSS ${before} kB -> ${after} kB with $(cat "$TMP/idle.out") idle connections: $per bytes each" >&2
    out+=("$per")
    stop_server
  done
  RESULT[memory]="${out[0]} ${out[1]}"
}

echo "vigil: $VIGIL; nginx: $($NGINX -v 2>&1 | sed 's/.*: //'); ${ROUNDS} rounds of ${DURATION}s; nofile $NOFILE" >&2
for c in $CASES; do
  case $c in
    small50) bench_case small50 1 50 /small.txt ;;
    small50x2) bench_case small50x2 2 50 /small.txt ;;
    small1000) bench_case small1000 1 1000 /small.txt ;;
    big) bench_case big 1 50 /big.bin ;;
    close) bench_case close 1 50 /small.txt -H "Connection: close" ;;
    memory) memory_case ;;
  esac
done

printf '\n| case | nginx | vigil | vigil/nginx | server CPU us/req nginx / vigil |\n|---|---:|---:|---:|---:|\n'
for c in $CASES; do
  read -r n v <<<"${RESULT[$c]}"
  cpu="-"
  if [[ -n ${CPU[$c]:-} ]]; then read -r cn cv <<<"${CPU[$c]}"; cpu="$cn / $cv"; fi
  case $c in
    small50) label="12 B file, 50 keep-alive conns, 1 worker (req/s)" ;;
    small50x2) label="12 B file, 50 keep-alive conns, 2 workers (req/s)" ;;
    small1000) label="12 B file, 1,000 keep-alive conns, 1 worker (req/s)" ;;
    big) label="1 MiB file, 50 keep-alive conns, 1 worker (req/s)" ;;
    close) label="12 B file, new connection per request, 50 conns (req/s)" ;;
    memory) label="RSS per idle keep-alive connection, $IDLE_CONNS conns (bytes; lower is better)" ;;
  esac
  ratio=$(awk -v n="$n" -v v="$v" 'BEGIN {if (n > 0) printf "%.2f", v / n; else print "-"}')
  printf '| %s | %s | %s | %s | %s |\n' "$label" "$n" "$v" "$ratio" "$cpu"
done
