# Sourced by the TLS load scripts: make_test_certs DIR writes the pair of
# throwaway certificates both servers use (ECDSA P-256 as ec.{crt,key} and
# RSA 2048 as rsa.{crt,key}, CN=localhost, valid 2 days) into DIR.
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
