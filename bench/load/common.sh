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

# CPU time (clock ticks) used so far by the server processes and their children.
server_ticks() {
  local total=0 p
  for p in "${SERVER_PIDS[@]}" $(for q in "${SERVER_PIDS[@]}"; do pgrep -P "$q" || true; done); do
    [[ -r /proc/$p/stat ]] || continue
    total=$((total + $(awk '{print $14 + $15}' "/proc/$p/stat")))
  done
  echo "$total"
}
