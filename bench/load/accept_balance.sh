#!/usr/bin/env bash
# How evenly workers share new connections, and how often a worker is woken
# for a connection it does not get, for vigil and nginx under the same
# connection-per-request load, with the three ways of sharing a listening
# socket: accept_mutex on, EPOLLEXCLUSIVE (accept_mutex off, the default of
# both), and one SO_REUSEPORT socket per worker.
#
#   bench/load/accept_balance.sh [requests] [concurrency] [build dir]
#   (WORKER_COUNTS="2 4", SETTINGS="accept_mutex EPOLLEXCLUSIVE reuseport",
#    SERVERS="vigil nginx" select a part of the matrix; REPEAT=3 runs of each,
#    alternating servers, and the table shows medians)
#
# Both servers answer GET / with the same 6-byte static file (vigil's HTTP
# server, nginx's); SERVERS=harness adds tests/support/worker_harness (the
# vigil runtime with a test protocol answering "<pid>"). The client is ab
# without -k: one connection per request.
# Per worker, perf counts (in the kernel, the same for both servers):
#   accept4 calls and successes, epoll_wait calls and those that returned 0,
# and /proc/<pid>/status gives voluntary context switches.
#   wake-ups per accept = (accept4 calls + empty epoll_waits) / accepted
# is 1.00 when every time a worker looked at a listening socket it got a
# connection; a thundering herd, futile accept4 (EAGAIN) and idle timeouts
# (the accept mutex's accept_mutex_delay polls) push it up.
set -euo pipefail

REQUESTS=${1:-20000}
CONCURRENCY=${2:-32}
BUILD=${3:-build/release}
VIGIL=$BUILD/vigil
HARNESS=$BUILD/worker_harness
NGINX=${NGINX:-/usr/sbin/nginx}
PORT=${PORT:-18300}
REPEAT=${REPEAT:-3}
WORK=$(mktemp -d /tmp/accept_balance.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

mkdir -p "$WORK/html"
echo hello > "$WORK/html/index.html"
for tool in ab perf python3 "$NGINX" "$VIGIL" "$HARNESS"; do
  command -v "$tool" >/dev/null || { echo "accept_balance: $tool not found" >&2; exit 1; }
done

wait_port() {
  for _ in $(seq 1 200); do
    if (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null; then return 0; fi
    sleep 0.02
  done
  echo "accept_balance: nothing listens on $1" >&2
  return 1
}

workers_of() {  # children of the master whose pid file is $1
  local master
  master=$(cat "$1")
  for _ in $(seq 1 100); do
    local n
    n=$(pgrep -P "$master" | wc -l)
    [ "$n" -ge "$2" ] && break
    sleep 0.02
  done
  pgrep -P "$master" | paste -sd,
}

vcsw() {  # "pid:voluntary_ctxt_switches ..." for the comma-separated pids
  local out=""
  for p in ${1//,/ }; do
    out+="$p:$(awk '/^voluntary_ctxt_switches/ {print $2}' /proc/$p/status) "
  done
  echo "$out"
}

# What a setting means for the configurations: the listen parameter and the
# accept_mutex value.
reuseport_of() { if [ "$1" = reuseport ]; then echo " reuseport"; fi; }
mutex_of() { if [ "$1" = accept_mutex ]; then echo on; else echo off; fi; }

harness_conf() {  # workers setting
  local listen mutex
  listen="harness_listen 127.0.0.1:$PORT$(reuseport_of "$2")"
  mutex=$(mutex_of "$2")
  cat <<CONF
daemon off;
error_log $WORK/v/error.log notice;
pid $WORK/v/vigil.pid;
worker_processes $1;
$listen;
events { worker_connections 4096; accept_mutex $mutex; }
CONF
}

vigil_conf() {  # workers setting: the real server, a small static file
  local listen mutex
  listen="127.0.0.1:$PORT$(reuseport_of "$2")"
  mutex=$(mutex_of "$2")
  cat <<CONF
daemon off;
error_log $WORK/v/error.log notice;
pid $WORK/v/vigil.pid;
worker_processes $1;
events { worker_connections 4096; accept_mutex $mutex; }
http {
  access_log off;
  server { listen $listen; root $WORK/html; }
}
CONF
}

nginx_conf() {  # workers setting: the same file
  local listen mutex
  listen="127.0.0.1:$PORT$(reuseport_of "$2")"
  mutex=$(mutex_of "$2")
  cat <<CONF
user root;
worker_processes $1;
error_log $WORK/n/error.log notice;
pid $WORK/n/nginx.pid;
events { worker_connections 4096; accept_mutex $mutex; }
http {
  access_log off;
  client_body_temp_path $WORK/n/body; proxy_temp_path $WORK/n/proxy;
  fastcgi_temp_path $WORK/n/fcgi; uwsgi_temp_path $WORK/n/uwsgi; scgi_temp_path $WORK/n/scgi;
  server { listen $listen; root $WORK/html; }
}
CONF
}

run_one() {  # server workers setting
  local server=$1 workers=$2 setting=$3 pidfile master
  rm -rf "$WORK/v" "$WORK/n"
  mkdir -p "$WORK/v" "$WORK/n"
  if [ "$server" = vigil ]; then
    vigil_conf "$workers" "$setting" > "$WORK/v/v.conf"
    "$VIGIL" -p "$WORK/v" -c "$WORK/v/v.conf" &
    pidfile=$WORK/v/vigil.pid
  elif [ "$server" = harness ]; then
    harness_conf "$workers" "$setting" > "$WORK/v/h.conf"
    "$HARNESS" -p "$WORK/v" -c "$WORK/v/h.conf" &
    pidfile=$WORK/v/vigil.pid
  else
    nginx_conf "$workers" "$setting" > "$WORK/n/n.conf"
    "$NGINX" -p "$WORK/n" -c "$WORK/n/n.conf" -g 'daemon off;' 2>/dev/null &
    pidfile=$WORK/n/nginx.pid
  fi
  master=$!
  wait_port $PORT
  for _ in $(seq 1 100); do [ -s "$pidfile" ] && break; sleep 0.02; done
  local pids
  pids=$(workers_of "$pidfile" "$workers")
  ab -q -n 1000 -c "$CONCURRENCY" "http://127.0.0.1:$PORT/" >/dev/null 2>&1 || true  # warm-up

  local before after
  before=$(vcsw "$pids")
  perf stat -x, --per-thread -p "$pids" -o "$WORK/perf.csv" \
    -e syscalls:sys_enter_accept4 -e syscalls:sys_exit_accept4 --filter 'ret >= 0' \
    -e syscalls:sys_enter_epoll_wait -e syscalls:sys_exit_epoll_wait --filter 'ret == 0' &
  local perf=$!
  sleep 0.3
  ab -n "$REQUESTS" -c "$CONCURRENCY" "http://127.0.0.1:$PORT/" > "$WORK/ab.txt" 2>&1 || true
  sleep 0.1
  kill -INT $perf
  wait $perf || true
  after=$(vcsw "$pids")

  kill -QUIT "$master"
  wait "$master" || true

  python3 - "$server" "$workers" "$setting" "$WORK/perf.csv" "$WORK/ab.txt" "$before" "$after" \
    >> "$WORK/results.jsonl" <<'PY'
import json, re, sys
server, workers, setting, perf_csv, ab_txt, before, after = sys.argv[1:8]
names = ["acc_calls", "accepted", "waits", "empty"]
events = ["syscalls:sys_enter_accept4", "syscalls:sys_exit_accept4",
          "syscalls:sys_enter_epoll_wait", "syscalls:sys_exit_epoll_wait"]
stats = {}
for line in open(perf_csv):
    f = line.strip().split(",")
    if len(f) < 4 or f[3] not in events:
        continue
    pid = f[0].rsplit("-", 1)[-1]
    stats.setdefault(pid, dict.fromkeys(names, 0))[names[events.index(f[3])]] = int(f[1] or 0)
parse = lambda s: {p: int(v) for p, v in (x.split(":") for x in s.split())}
b, a = parse(before), parse(after)
text = open(ab_txt).read()
rps = re.search(r"Requests per second:\s+([\d.]+)", text)
failed = re.search(r"Connect: (\d+), Receive: (\d+), Length: \d+, Exceptions: (\d+)", text)
print(json.dumps({
    "server": server, "setting": setting, "workers": int(workers),
    "accepted": sorted((s["accepted"] for s in stats.values()), reverse=True),
    "accept_calls": sum(s["acc_calls"] for s in stats.values()),
    "empty_waits": sum(s["empty"] for s in stats.values()),
    "switches": sum(a[p] - b[p] for p in a if p in b),
    "rps": float(rps.group(1)) if rps else 0.0,
    "failed": sum(int(x) for x in failed.groups()) if failed else 0,
}))
PY
}

echo "ab -n $REQUESTS -c $CONCURRENCY, median of $REPEAT runs, $(nproc) CPUs, $(uname -r), $("$NGINX" -v 2>&1 | sed 's/.*version: //')"
echo
for workers in ${WORKER_COUNTS:-2 4}; do
  for setting in ${SETTINGS:-accept_mutex EPOLLEXCLUSIVE reuseport}; do
    for ((rep = 0; rep < REPEAT; rep++)); do
      for server in ${SERVERS:-vigil nginx}; do
        run_one "$server" "$workers" "$setting"
      done
    done
  done
done

python3 - "$WORK/results.jsonl" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
groups = {}
for r in runs:
    groups.setdefault((r["workers"], r["setting"], r["server"]), []).append(r)
def figures(r):
    total = sum(r["accepted"])
    mean = total / len(r["accepted"])
    r["dev"] = max(abs(c - mean) / mean for c in r["accepted"]) * 100 if mean else 0
    r["wake"] = (r["accept_calls"] + r["empty_waits"]) / total if total else 0
    r["futile"] = (r["accept_calls"] - total) / total if total else 0
    r["sw"] = r["switches"] / total if total else 0
    return r
print("| server | setting | workers | share of accepts per worker (%) | max deviation from even"
      " (min–max) | wake-ups per accept (min–max) | futile accept4 per accept | empty waits | voluntary switches per"
      " request | req/s | failed |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for (workers, setting, server), rs in groups.items():
    rs = [figures(r) for r in rs]
    med = lambda k: statistics.median(r[k] for r in rs)
    mid = sorted(rs, key=lambda r: r["dev"])[len(rs) // 2]  # shares of the median-balanced run
    total = sum(mid["accepted"])
    shares = " / ".join(f"{100.0 * c / total:.0f}" for c in mid["accepted"])
    span = lambda k, f: f"{min(r[k] for r in rs):{f}}–{max(r[k] for r in rs):{f}}"
    print(f"| {server} | {setting} | {workers} | {shares} | {med('dev'):.1f}% ({span('dev', '.1f')}) |"
          f" {med('wake'):.3f} ({span('wake', '.3f')}) |"
          f" {med('futile'):.3f} | {med('empty_waits'):.0f} | {med('sw'):.2f} | {med('rps'):.0f} |"
          f" {sum(r['failed'] for r in rs)} |")
PY
