#!/usr/bin/env bash
# gzip: Vigil against nginx compressing the same 100 KiB HTML page, same
# machine, the same http block for both (access_log off, sendfile on, gzip on
# at gzip_comp_level LEVEL, nginx's defaults otherwise), one worker each
# pinned to CPU 0, wrk on CPU 1 with 50 keep-alive connections sending
# "Accept-Encoding: gzip", alternately: for each level and round, nginx then
# Vigil. Reports the medians of requests/s and of the server's CPU per
# request, and the bytes on the wire per response (head and coded body, as
# curl receives them) for both. The page fits in the default gzip_buffers
# (32 x 4k), so Vigil compresses it whole with libdeflate, nginx with zlib.
#
#   bench/load/gzip_vs_nginx.sh [ROUNDS [SECONDS]]     (default 3 rounds of 5 s)
#
# Environment: VIGIL (default build/release/vigil, built if missing), NGINX
# (default /usr/sbin/nginx), LEVELS (default "1 5").
set -euo pipefail

ROUNDS=${1:-3}
DURATION=${2:-5}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=common.sh
. "$ROOT/bench/load/common.sh"
VIGIL=${VIGIL:-$ROOT/build/release/vigil}
NGINX=${NGINX:-/usr/sbin/nginx}
LEVELS=${LEVELS:-"1 5"}

build_vigil_if_missing
require_tools "$NGINX" wrk taskset python3 curl
make_bench_tmp vigil_gzip_bench

mkdir -p "$TMP/html" "$TMP/nginx/logs" "$TMP/vigil/logs" "$TMP/vigil/conf"
# 100 KiB of HTML that compresses as pages do (about 4:1 at level 1): rows
# of a table with varying numbers and words.
python3 - "$TMP/html/index.html" <<'PY'
import random, sys
random.seed(7)
words = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor".split()
out = ["<!DOCTYPE html>\n<html><head><title>bench</title></head><body><table>\n"]
size = sum(map(len, out))
i = 0
while size < 102400:
    row = '<tr class="r%d"><td>%d</td><td>%s</td><td>%.3f</td></tr>\n' % (
        i % 7, random.randrange(10**6), " ".join(random.choice(words) for _ in range(6)),
        random.random() * 1000)
    out.append(row)
    size += len(row)
    i += 1
open(sys.argv[1], "w").write("".join(out)[:102400 - 23] + "</table></body></html>\n")
PY
# World-readable, for nginx's worker (nobody) when run as root.
chmod 755 "$TMP" "$TMP/html"
chmod 644 "$TMP/html/index.html"
PORT=$(free_port)

http_block() {  # level
  cat <<EOF
http {
    access_log off;
    sendfile on;
    gzip on;
    gzip_comp_level $1;
    server {
        listen 127.0.0.1:$PORT;
        root $TMP/html;
    }
}
EOF
}

SERVER_PIDS=()
start_nginx() {  # level
  { echo "error_log $TMP/nginx/logs/error.log error; pid $TMP/nginx/logs/nginx.pid;"
    echo "events { worker_connections 1024; }"
    http_block "$1"; } > "$TMP/nginx/nginx.conf"
  taskset -c 0 "$NGINX" -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" -g 'daemon off; master_process off;' &
  SERVER_PIDS=($!)
  PIDS+=($!)
  wait_port "$PORT"
}

start_vigil() {  # level
  { echo "daemon off; master_process off; worker_processes 1;"
    echo "error_log $TMP/vigil/logs/error.log notice; pid $TMP/vigil/logs/vigil.pid;"
    echo "events { worker_connections 1024; use epoll; }"
    http_block "$1"; } > "$TMP/vigil/conf/vigil.conf"
  taskset -c 0 "$VIGIL" -p "$TMP/vigil" -c conf/vigil.conf 2>>"$TMP/vigil/logs/stderr" &
  SERVER_PIDS=($!)
  PIDS+=($!)
  wait_port "$PORT"
}

# "requests/s server-CPU-us/request"; errors (Non-2xx, socket) are reported.
run_wrk() {  # conns
  local out t0 t1
  t0=$(server_ticks)
  out=$(taskset -c 1 wrk -t1 -c"$1" -d"${DURATION}s" -H "Accept-Encoding: gzip" \
    "http://127.0.0.1:$PORT/index.html" 2>&1)
  t1=$(server_ticks)
  if grep -q "Non-2xx\|Socket errors" <<<"$out"; then
    echo "wrk reported errors:" >&2
    grep "Non-2xx\|Socket errors" <<<"$out" >&2
  fi
  local rps reqs
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  reqs=$(awk '/requests in/ {print $1}' <<<"$out")
  awk -v r="$rps" -v n="$reqs" -v t=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" \
    'BEGIN {printf "%s %.1f\n", r, (n > 0 ? t * 1e6 / hz / n : 0)}'
}

# Bytes of one response as received (head + body with its chunk framing),
# and a check that it decodes to the page.
wire_bytes() {
  local got
  got=$(curl -s --raw -H "Accept-Encoding: gzip" -o "$TMP/raw" -w '%{size_header} %{size_download}' \
    "http://127.0.0.1:$PORT/index.html")
  curl -s --compressed -o "$TMP/decoded" "http://127.0.0.1:$PORT/index.html"
  cmp -s "$TMP/decoded" "$TMP/html/index.html" || echo "warning: the decoded body differs" >&2
  awk '{print $1 + $2}' <<<"$got"
}

declare -A RPS CPU BYTES
echo "vigil: $VIGIL; nginx: $($NGINX -v 2>&1 | sed 's/.*: //'); ${ROUNDS} rounds of ${DURATION}s" >&2
for level in $LEVELS; do
  declare -A res=() cpu=()
  for r in $(seq 1 "$ROUNDS"); do
    msg="  level $level round $r:"
    for srv in nginx vigil; do
      "start_$srv" "$level"
      [[ $r == 1 ]] && BYTES[$level,$srv]=$(wire_bytes)
      DURATION=1 run_wrk 10 >/dev/null  # warm-up
      read -r l_rps l_cpu <<<"$(run_wrk 50)"
      res[$srv]+="$l_rps "
      cpu[$srv]+="$l_cpu "
      stop_server
      msg+=" $srv $l_rps req/s $l_cpu us/req;"
    done
    echo "$msg" >&2
  done
  for srv in nginx vigil; do
    RPS[$level,$srv]=$(median_of "${res[$srv]}")
    CPU[$level,$srv]=$(median_of "${cpu[$srv]}")
  done
  unset res cpu
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0 && a > 0) printf "%.2f", a / b; else print "-"}'; }
echo
echo "| gzip_comp_level | nginx req/s | vigil req/s | vigil/nginx | server CPU us/req (nginx / vigil) | bytes per response (nginx / vigil) |"
echo "|---|---:|---:|---:|---:|---:|"
for level in $LEVELS; do
  echo "| $level | ${RPS[$level,nginx]} | ${RPS[$level,vigil]} | $(ratio "${RPS[$level,vigil]}" "${RPS[$level,nginx]}") | ${CPU[$level,nginx]} / ${CPU[$level,vigil]} | ${BYTES[$level,nginx]} / ${BYTES[$level,vigil]} |"
done
