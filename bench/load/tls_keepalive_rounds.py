#!/usr/bin/env python3
"""Keep-alive requests over TLS in lock-step rounds, for counting the server's
instructions per request under callgrind (bench/load/tls_instructions.sh).

    tls_keepalive_rounds.py PORT CONNS ROUNDS PID

Opens CONNS TLS connections, runs 3 warm-up rounds (a request on every
connection, then every response), zeroes the callgrind counters of PID
(`callgrind_control -z`), runs ROUNDS rounds, dumps them (`callgrind_control
-d`) and prints the number of requests counted. Certificates are not verified.
"""
import socket
import ssl
import subprocess
import sys

REQUEST = b"GET /small.txt HTTP/1.1\r\nHost: localhost\r\n\r\n"


def main():
    port, conns, rounds, pid = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    socks = [ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)),
                             server_hostname="localhost") for _ in range(conns)]

    def one_round():
        for s in socks:
            s.sendall(REQUEST)
        for s in socks:
            data = b""
            while not data.endswith(b"hello world\n"):
                chunk = s.recv(4096)
                if not chunk:
                    raise ConnectionError("closed")
                data += chunk

    for _ in range(3):  # from the second keep-alive wait on, buffers are kept
        one_round()
    subprocess.run(["callgrind_control", "-z", pid], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=True)
    for _ in range(rounds):
        one_round()
    subprocess.run(["callgrind_control", "-d", pid], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=True)
    print(conns * rounds)


if __name__ == "__main__":
    main()
