# Sourced by the load scripts in bench/load: what they share.

# make_test_certs DIR: the pair of throwaway certificates the TLS benchmarks
# give both servers (ECDSA P-256 as ec.{crt,key} and RSA 2048 as
# rsa.{crt,key}, CN=localhost, valid 2 days).
make_test_certs() {
  (
    cd "$1" || exit 1
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ec.key \
      -out ec.crt -days 2 -subj /CN=localhost 2>/dev/null
    openssl req -x509 -newkey rsa:2048 -nodes -keyout rsa.key -out rsa.crt -days 2 \
      -subj /CN=localhost 2>/dev/null
    chmod 644 ./*
  )
}

# tls_server_block PORT ROOT CERTS: the server-block lines both servers get in
# the TLS benchmarks (the same directives mean the same thing to both).
tls_server_block() {
  cat <<BLOCK
listen 127.0.0.1:$1 ssl;
        root $2;
        ssl_certificate $3/ec.crt;
        ssl_certificate_key $3/ec.key;
        ssl_certificate $3/rsa.crt;
        ssl_certificate_key $3/rsa.key;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_ciphers HIGH:!aNULL:!MD5;
        ssl_session_cache shared:SSL:10m;
        ssl_session_tickets on;
BLOCK
}

# The servers a script started (it appends their pids to SERVER_PIDS).
stop_server() {
  for p in "${SERVER_PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  SERVER_PIDS=()
  sleep 0.3
}

# The one proxy a script started (PROXY_PID), stopped and waited for.
stop_proxy() {
  kill "$PROXY_PID" 2>/dev/null || true
  wait "$PROXY_PID" 2>/dev/null || true
  PROXY_PID=
  sleep 0.3
}

# CPU time (clock ticks, user + system) used so far by one process.
# A process that ended since it was listed counts 0.
pid_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }

# CPU time (clock ticks) used so far by the server processes and their children.
server_ticks() {
  local total=0 p
  for p in "${SERVER_PIDS[@]}" $(for q in "${SERVER_PIDS[@]}"; do pgrep -P "$q" || true; done); do
    [[ -r /proc/$p/stat ]] || continue
    total=$((total + $(pid_ticks "$p")))
  done
  echo "$total"
}

# start_pinned PORT COMMAND...: one server process pinned to CPU 0 (the
# single-worker cases; wrk runs on CPU 1), its pid in SERVER_PIDS and PIDS;
# returns when PORT accepts.
start_pinned() {
  local port=$1
  shift
  taskset -c 0 "$@" &
  SERVER_PIDS=($!)
  PIDS+=($!)
  wait_port "$port"
}

# wrk_round URL [WRK-ARGS...]: one measured run against the servers in
# SERVER_PIDS: wrk -t1 on CPU 1, CONNS (default 50) keep-alive connections,
# DURATION seconds. Prints "requests/s server-CPU-us/request". A Non-2xx or
# socket-error line from wrk fails it (and, under set -e, the script): the
# rate would count the errors.
wrk_round() {
  local url=$1 out t0 t1
  shift
  t0=$(server_ticks)
  out=$(taskset -c 1 wrk -t1 -c"${CONNS:-50}" -d"${DURATION}s" "$@" "$url" 2>&1)
  t1=$(server_ticks)
  if grep -q "Non-2xx\|Socket errors" <<<"$out"; then
    echo "wrk reported errors against $url:" >&2
    grep "Non-2xx\|Socket errors" <<<"$out" >&2
    return 1
  fi
  awk -v t=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" '/requests in/ {n = $1} /Requests\/sec/ {r = $2}
    END {printf "%s %.2f\n", r, (n > 0 ? t * 1e6 / hz / n : 0)}' <<<"$out"
}

# build_vigil_if_missing: the release vigil at $VIGIL, built when absent.
build_vigil_if_missing() {
  [[ -x $VIGIL ]] && return 0
  echo "building $VIGIL" >&2
  (cd "$ROOT" && cmake --preset release >/dev/null && cmake --build --preset release -j2 --target vigil >/dev/null)
}

# require_tools TOOL...: exits naming the first one that is not installed.
require_tools() {
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null || { echo "missing $tool" >&2; exit 1; }
  done
}

# raise_nofile: the descriptor limit as far as the hard limit allows; sets
# NOFILE and WORKER_CONNECTIONS (what is left after 100 for the rest).
raise_nofile() {
  ulimit -n "$(ulimit -Hn)"
  NOFILE=$(ulimit -n)
  # shellcheck disable=SC2034  # read by the scripts' configurations
  WORKER_CONNECTIONS=$((NOFILE - 100))
}

# make_bench_tmp NAME: TMP, a fresh /tmp/NAME.XXXXXX readable by nginx's
# workers ("nobody"), removed at exit (unless KEEP_TMP) after killing what the
# script appended to PIDS.
make_bench_tmp() {
  TMP=$(mktemp -d "/tmp/$1.XXXXXX")
  chmod 755 "$TMP"
  PIDS=()
  trap cleanup EXIT
}
cleanup() {
  for p in "${PIDS[@]:-}"; do [[ -n $p ]] && kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [[ -n ${KEEP_TMP:-} ]] || rm -rf "$TMP"
}

# A port nothing listens on now.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# wait_port PORT: until something accepts on PORT, 5 s at most.
wait_port() {
  local port=$1
  for _ in $(seq 1 100); do
    if (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null; then return 0; fi
    sleep 0.05
  done
  echo "nothing came up on port $port" >&2
  return 1
}

# median_of "V1 V2 ...": the median of the values (0 for none).
median_of() {
  tr ' ' '\n' <<<"$1" | grep . | sort -g |
    awk '{a[NR]=$1} END {if (NR == 0) print 0; else print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'
}

rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }

# idle_bytes_per_conn LABEL PID CLIENT TRIES WHAT: sets IDLE_BYTES to the
# server PID's RSS growth per connection while CLIENT (idle_clients.py or
# idle_tls_clients.py, in this folder) holds IDLE_CONNS idle connections to
# PORT, each after one request of /small.txt; waits TRIES tenths of a second
# for the client's "ready", then IDLE_SETTLE seconds (default 0.5). Logs the
# figures as "  LABEL: ... WHAT: ...".
idle_bytes_per_conn() {
  local label=$1 pid=$2 client=$3 tries=$4 what=$5 before after fifo_w
  before=$(rss_kb "$pid")
  rm -f "$TMP/idle.out"  # not the previous server's "ready"
  exec {fifo_w}> >(python3 "$ROOT/bench/load/$client" "$PORT" "$IDLE_CONNS" /small.txt > "$TMP/idle.out")
  for _ in $(seq 1 "$tries"); do grep -q ready "$TMP/idle.out" 2>/dev/null && break; sleep 0.1; done
  sleep "${IDLE_SETTLE:-0.5}"
  after=$(rss_kb "$pid")
  exec {fifo_w}>&-
  sleep 1
  IDLE_BYTES=$(awk -v a="$after" -v b="$before" -v n="$IDLE_CONNS" 'BEGIN {printf "%.0f", (a - b) * 1024 / n}')
  echo "  $label: RSS ${before} kB -> ${after} kB with $(cat "$TMP/idle.out") $what: $IDLE_BYTES bytes each" >&2
}
