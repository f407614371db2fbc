#!/usr/bin/env python3
"""Opens N TLS connections to an HTTPS server, sends one keep-alive request on
each and reads its response, then keeps them all open and idle until stdin
closes.

    idle_tls_clients.py PORT N [PATH]

Prints "ready N" once every connection has had its response, so a caller can
measure the server's memory with N idle TLS connections. Used by
bench/load/tls_vs_nginx.sh. Certificates are not verified (a throwaway CA).
"""
import socket
import ssl
import sys

# The same response reader as the plain clients (this folder is on sys.path
# when the script runs); no __pycache__ left in the source tree.
sys.dont_write_bytecode = True
from idle_clients import read_response  # noqa: E402


def main():
    port, n = int(sys.argv[1]), int(sys.argv[2])
    path = sys.argv[3] if len(sys.argv) > 3 else "/"
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    conns = []
    req = ("GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n" % path).encode()
    for _ in range(n):
        raw = socket.create_connection(("127.0.0.1", port))
        s = ctx.wrap_socket(raw, server_hostname="localhost")
        s.sendall(req)
        read_response(s)
        conns.append(s)
    print("ready %d" % len(conns), flush=True)
    sys.stdin.read()
    for s in conns:
        s.close()


if __name__ == "__main__":
    main()
