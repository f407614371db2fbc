#!/usr/bin/env bash
# brotli and zstd beside gzip, on Vigil alone (nginx has no brotli or zstd
# without third-party modules): the same 100 KiB HTML page as
# gzip_vs_nginx.sh, one worker pinned to CPU 0, wrk on CPU 1 with 50
# keep-alive connections sending "Accept-Encoding: CODING", each coding at
# each of its levels in CONFIGS, alternately within a round. Reports the
# medians of requests/s and of the server's CPU per request, and the bytes on
# the wire per response (head and coded body with its chunk framing), each
# body checked to decode to the page (gzip with gunzip, br with python's
# decoder when there is one, zstd with the zstd tool). The page fits in the
# default gzip_buffers, so the gzip rows are libdeflate's whole-body path.
#
#   bench/load/brotli.sh [ROUNDS [SECONDS]]     (default 3 rounds of 5 s)
#
# Environment: VIGIL (default build/release/vigil, built if missing),
# CONFIGS (default "gzip:1 gzip:5 br:1 br:4 br:6 zstd:1 zstd:3").
set -euo pipefail

ROUNDS=${1:-3}
DURATION=${2:-5}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=common.sh
. "$ROOT/bench/load/common.sh"
VIGIL=${VIGIL:-$ROOT/build/release/vigil}
CONFIGS=${CONFIGS:-"gzip:1 gzip:5 br:1 br:4 br:6 zstd:1 zstd:3"}

build_vigil_if_missing
require_tools wrk taskset python3 curl
make_bench_tmp vigil_brotli_bench

mkdir -p "$TMP/html" "$TMP/vigil/logs" "$TMP/vigil/conf"
# The page of gzip_vs_nginx.sh (the same seed).
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
PORT=$(free_port)

SERVER_PIDS=()
start_vigil() {  # coding level
  local directive=$1
  [[ $1 == br ]] && directive=brotli
  { echo "daemon off; master_process off; worker_processes 1;"
    echo "error_log $TMP/vigil/logs/error.log notice; pid $TMP/vigil/logs/vigil.pid;"
    echo "events { worker_connections 1024; use epoll; }"
    cat <<EOF
http {
    access_log off;
    sendfile on;
    $directive on;
    ${directive}_comp_level $2;
    server {
        listen 127.0.0.1:$PORT;
        root $TMP/html;
    }
}
EOF
  } > "$TMP/vigil/conf/vigil.conf"
  taskset -c 0 "$VIGIL" -p "$TMP/vigil" -c conf/vigil.conf 2>>"$TMP/vigil/logs/stderr" &
  SERVER_PIDS=($!)
  PIDS+=($!)
  wait_port "$PORT"
}

run_wrk() {  # conns coding
  local out t0 t1
  t0=$(server_ticks)
  out=$(taskset -c 1 wrk -t1 -c"$1" -d"${DURATION}s" -H "Accept-Encoding: $2" \
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

# Bytes of one response as received, and a check that it decodes to the page
# (br: only where python3 has the brotli module; the integration tests decode
# every coding with the libraries' decoders).
wire_bytes() {  # coding
  local got ce
  got=$(curl -s --raw -H "Accept-Encoding: $1" -D "$TMP/head" -o "$TMP/raw" \
    -w '%{size_header} %{size_download}' "http://127.0.0.1:$PORT/index.html")
  ce=$(tr -d '\r' <"$TMP/head" | awk -F': ' 'tolower($1) == "content-encoding" {print $2}')
  [[ $ce == "$1" ]] || echo "warning: Content-Encoding \"$ce\", not $1" >&2
  curl -s -H "Accept-Encoding: $1" -o "$TMP/body" "http://127.0.0.1:$PORT/index.html"
  local decoded=1
  case $1 in
    gzip) gzip -dc <"$TMP/body" >"$TMP/decoded" ;;
    zstd) zstd -qdc <"$TMP/body" >"$TMP/decoded" ;;
    br) python3 -c 'import brotli,sys; sys.stdout.buffer.write(brotli.decompress(sys.stdin.buffer.read()))' \
          <"$TMP/body" >"$TMP/decoded" 2>/dev/null || decoded=0 ;;
  esac
  if [[ $decoded == 1 ]] && ! cmp -s "$TMP/decoded" "$TMP/html/index.html"; then
    echo "warning: the decoded $1 body differs" >&2
  fi
  awk '{print $1 + $2}' <<<"$got"
}

declare -A RPS CPU BYTES res cpu
echo "vigil: $VIGIL; ${ROUNDS} rounds of ${DURATION}s" >&2
for r in $(seq 1 "$ROUNDS"); do
  msg="  round $r:"
  for cfg in $CONFIGS; do
    coding=${cfg%%:*}
    level=${cfg##*:}
    start_vigil "$coding" "$level"
    [[ $r == 1 ]] && BYTES[$cfg]=$(wire_bytes "$coding")
    DURATION=1 run_wrk 10 "$coding" >/dev/null  # warm-up
    read -r l_rps l_cpu <<<"$(run_wrk 50 "$coding")"
    res[$cfg]+="$l_rps "
    cpu[$cfg]+="$l_cpu "
    stop_server
    msg+=" $cfg $l_rps req/s;"
  done
  echo "$msg" >&2
done

echo
echo "| coding:level | Vigil req/s | server CPU us/req | bytes per response | page / bytes |"
echo "|---|---:|---:|---:|---:|"
for cfg in $CONFIGS; do
  RPS[$cfg]=$(median_of "${res[$cfg]}")
  CPU[$cfg]=$(median_of "${cpu[$cfg]}")
  echo "| $cfg | ${RPS[$cfg]} | ${CPU[$cfg]} | ${BYTES[$cfg]} | $(awk -v b="${BYTES[$cfg]}" 'BEGIN {printf "%.2f", 102400 / b}') |"
done
