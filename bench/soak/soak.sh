#!/usr/bin/env bash
# Soak test: vigil with two workers under a mix of clients for a given time
# (bench/soak/soak_clients.py: keep-alive, connection per request,
# pipelining, slow readers, slowloris, resets mid-response, a stream echo
# session), a reload (HUP) every 30 s and a worker SIGKILL every 2 minutes.
# Every 10 s it samples the RSS and open fds of the master and of the
# workers, and it fails when
#   - a well-behaved request failed other than within 3 s of a SIGKILL, or
#   - the master's RSS or fds, or the workers' (per worker), grew: the last
#     three samples against the first three after warm-up (RSS +20% and
#     +4 MiB, fds +8).
#
#   bench/soak/soak.sh [seconds=600] [vigil binary=build/release/vigil]
#   RELOAD_EVERY=30 KILL_EVERY=120 (seconds) change the two periods.
#
# Prints a Markdown table (docs/reliability.md has one) and exits 0 or 1.
set -euo pipefail
DURATION=${1:-600}
VIGIL=${2:-build/release/vigil}
HERE=$(cd "$(dirname "$0")" && pwd)
VIGIL=$(cd "$(dirname "$VIGIL")" && pwd)/$(basename "$VIGIL")

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
HTTP=$(free_port); STREAM=$(free_port); ECHO=$(free_port)
DIR=$(mktemp -d /tmp/vigil_soak_XXXXXX)
chmod 755 "$DIR"
mkdir -p "$DIR/conf" "$DIR/logs" "$DIR/html"
echo "hello" > "$DIR/html/index.html"
head -c $((1 << 20)) /dev/zero | tr '\0' 'b' > "$DIR/html/big.bin"
cat > "$DIR/conf/vigil.conf" <<CONF
daemon off;
worker_processes 2;
error_log logs/error.log notice;
events { worker_connections 1024; }
http {
  access_log off;
  sendfile on;
  client_header_timeout 5s;
  server {
    listen 127.0.0.1:$HTTP;
    root html;
    location = /status { stub_status; }
  }
}
stream {
  server { listen 127.0.0.1:$STREAM; proxy_pass 127.0.0.1:$ECHO; }
}
CONF

MASTER=
CLIENTS=
cleanup() {
  [ -n "$CLIENTS" ] && kill "$CLIENTS" 2>/dev/null || true
  if [ -n "$MASTER" ]; then
    kill -TERM "$MASTER" 2>/dev/null || true
    wait "$MASTER" 2>/dev/null || true
  fi
  rm -rf "$DIR"
}
trap cleanup EXIT

"$VIGIL" -t -q -p "$DIR"
"$VIGIL" -p "$DIR" 2>>"$DIR/logs/stderr.log" &
MASTER=$!
for _ in $(seq 100); do
  [ "$(grep -c 'running:' "$DIR/logs/error.log" 2>/dev/null)" -ge 2 ] 2>/dev/null && break
  sleep 0.1
done

python3 "$HERE/soak_clients.py" --http "$HTTP" --stream "$STREAM" --echo "$ECHO" \
  --duration "$DURATION" --stats "$DIR/stats.jsonl" &
CLIENTS=$!

rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
fds() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }
workers() { pgrep -P "$MASTER" || true; }

SAMPLES="$DIR/samples.txt"
KILLS="$DIR/kills.txt"
: > "$SAMPLES"; : > "$KILLS"
start=$(date +%s)
RELOAD_EVERY=${RELOAD_EVERY:-30}; KILL_EVERY=${KILL_EVERY:-120}
next_sample=$((start + 10)); next_reload=$((start + RELOAD_EVERY)); next_kill=$((start + KILL_EVERY))
reloads=0; kills=0
while :; do
  now=$(date +%s)
  elapsed=$((now - start))
  [ "$elapsed" -ge "$DURATION" ] && break
  if [ "$now" -ge "$next_reload" ]; then
    kill -HUP "$MASTER"; reloads=$((reloads + 1)); next_reload=$((next_reload + RELOAD_EVERY))
  fi
  if [ "$now" -ge "$next_kill" ]; then
    victim=$(workers | head -1)
    if [ -n "$victim" ]; then
      # The time is taken before the signal: a client can see the reset
      # before a date run after kill would return.
      at=$(date +%s.%N)
      kill -KILL "$victim" 2>/dev/null && { echo "$at" >> "$KILLS"; kills=$((kills + 1)); }
    fi
    next_kill=$((next_kill + KILL_EVERY))
  fi
  if [ "$now" -ge "$next_sample" ]; then
    wrss=0; wfds=0; n=0
    for w in $(workers); do
      wrss=$((wrss + $(rss_kb "$w"))); wfds=$((wfds + $(fds "$w"))); n=$((n + 1))
    done
    echo "$elapsed $(rss_kb "$MASTER") $(fds "$MASTER") $n $wrss $wfds" >> "$SAMPLES"
    next_sample=$((next_sample + 10))
  fi
  sleep 0.2
done
wait "$CLIENTS" || true
CLIENTS=

python3 - "$SAMPLES" "$DIR/stats.jsonl" "$KILLS" "$reloads" "$kills" <<'PY'
import json, sys
samples = [list(map(int, l.split())) for l in open(sys.argv[1]) if l.strip()]
stats = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
kills = [float(l) for l in open(sys.argv[3]) if l.strip()]
reloads, nkills = int(sys.argv[4]), int(sys.argv[5])
final = next((s for s in stats if s.get("final")), {"ok": 0, "failed": 0, "hostile": 0, "failures": []})
periodic = [s for s in stats if not s.get("final")]
print("| time (s) | master RSS (KiB) | master fds | workers | workers RSS (KiB) | workers fds | requests ok | failed |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|")
for i, (t, mrss, mfds, n, wrss, wfds) in enumerate(samples):
    st = periodic[i] if i < len(periodic) else final
    print(f"| {t} | {mrss} | {mfds} | {n} | {wrss} | {wfds} | {st['ok']} | {st['failed']} |")
unexcused = [f for f in final["failures"] if not any(k <= f[0] <= k + 3 for k in kills)]
for f in unexcused:
    near = min(kills, key=lambda k: abs(f[0] - k)) if kills else None
    print(f"unexcused failure: {f[1]} at {f[0]:.3f}" +
          (f", {f[0] - near:+.3f} s from the nearest SIGKILL" if near else ""))
kinds = {}
for f in unexcused:
    kinds[f[1]] = kinds.get(f[1], 0) + 1
print()
print(f"requests ok {final['ok']}, failed {final['failed']} "
      f"({len(final['failures']) - len(unexcused)} within 3 s of a worker SIGKILL, "
      f"{len(unexcused)} otherwise), hostile clients {final['hostile']}, "
      f"reloads {reloads}, worker SIGKILLs {nkills}")
bad = []
if final["ok"] == 0:
    bad.append("no request succeeded")
if unexcused:
    bad.append(f"{len(unexcused)} failed requests not explained by a SIGKILL: {kinds}")
steady = samples[2:] if len(samples) > 5 else samples
k = 3 if len(steady) >= 6 else 2 if len(steady) >= 4 else 0  # a 60 s run has 5 samples
if k:
    # Workers are compared per worker: just after a reload the old ones are
    # still finishing beside the new ones.
    def avg(rows, col):
        vals = [r[col] / (r[3] or 1) if col in (4, 5) else r[col] for r in rows]
        return sum(vals) / len(vals)
    first, last = steady[:k], steady[-k:]
    for col, name in ((1, "master RSS"), (4, "RSS per worker")):
        a, b = avg(first, col), avg(last, col)
        if b > a * 1.2 and b - a > 4096:
            bad.append(f"{name} grew from {a:.0f} to {b:.0f} KiB")
    for col, name in ((2, "master fds"), (5, "fds per worker")):
        a, b = avg(first, col), avg(last, col)
        if b - a > 8:
            bad.append(f"{name} grew from {a:.0f} to {b:.0f}")
for b in bad:
    print("FAIL:", b)
print("PASS" if not bad else "FAIL")
sys.exit(1 if bad else 0)
PY
