#!/usr/bin/env python3
"""Peers for the mail proxy's integration tests (tests/integration/mail_*_test.cc).

  mail_peers.py serve
      An auth_http server and small IMAP, POP3 and SMTP backends on 127.0.0.1,
      ephemeral ports. Prints "PORTS auth=A imap=I pop3=P smtp=S", then one
      line per event ("AUTH ...", "IMAP-BACKEND ...", ...), until killed.
  mail_peers.py <scenario> <vigil port> [args]
      A client scenario with Python's imaplib / poplib / smtplib; exit 0 and
      "SCENARIO OK" when everything went as expected.

The auth server's users: alice/secret (OK), wait/* (Auth-Wait: 0, the client
may try again), anything else: "Invalid login or password" without Auth-Wait
(the proxy closes). CRAM-MD5 and APOP digests are checked against "secret".
"""
import hashlib
import hmac
import imaplib
import poplib
import smtplib
import socket
import socketserver
import ssl
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, HTTPServer

OUT_LOCK = threading.Lock()


def emit(line):
    with OUT_LOCK:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


BACKEND_PORTS = {}


class AuthHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, *args):
        pass

    def do_GET(self):
        h = self.headers
        method = h.get("Auth-Method", "")
        user = urllib.parse.unquote(h.get("Auth-User", ""))
        password = urllib.parse.unquote(h.get("Auth-Pass", ""))
        salt = urllib.parse.unquote(h.get("Auth-Salt", ""))
        proto = h.get("Auth-Protocol", "")
        emit("AUTH method=%s user=%s pass=%s proto=%s attempt=%s client=%s host=%s x=%s path=%s"
             % (method, user, password, proto, h.get("Auth-Login-Attempt"), h.get("Client-IP"),
                h.get("Client-Host"), h.get("X-Test", "-"), self.path))
        if h.get("Auth-SSL"):
            # The client's TLS facts; a certificate passed whole
            # (auth_http_pass_client_cert) must be the one fingerprinted.
            pem = urllib.parse.unquote(h.get("Auth-SSL-Cert", ""))
            cert_sha1 = hashlib.sha1(ssl.PEM_cert_to_DER_cert(pem)).hexdigest() if pem else "-"
            emit("AUTH-SSL %s protocol=%s cipher=%s verify=%s subject=%s issuer=%s serial=%s "
                 "fingerprint=%s cert=%s"
                 % (h.get("Auth-SSL"), h.get("Auth-SSL-Protocol", "-"), h.get("Auth-SSL-Cipher", "-"),
                    h.get("Auth-SSL-Verify", "-"), h.get("Auth-SSL-Subject", "-"),
                    h.get("Auth-SSL-Issuer", "-"), h.get("Auth-SSL-Serial", "-"),
                    h.get("Auth-SSL-Fingerprint", "-"), cert_sha1))
            if pem and cert_sha1 != h.get("Auth-SSL-Fingerprint"):
                user = "certificate mismatch"
        if h.get("Proxy-Protocol-Addr"):
            emit("AUTH-PP addr=%s port=%s server=%s:%s"
                 % (h.get("Proxy-Protocol-Addr"), h.get("Proxy-Protocol-Port"),
                    h.get("Proxy-Protocol-Server-Addr"), h.get("Proxy-Protocol-Server-Port")))
        ok = False
        if method in ("plain", "login") and user == "alice" and password == "secret":
            ok = True
        elif method == "cram-md5" and user == "alice":
            want = hmac.new(b"secret", salt.encode(), hashlib.md5).hexdigest()
            ok = password == want
        elif method == "apop" and user == "alice":
            ok = password == hashlib.md5((salt + "secret").encode()).hexdigest()
        elif method == "external" and user == "alice":
            ok = True
        elif method == "none":
            # smtp_auth none: the envelope decides.
            smtp_from, smtp_to = h.get("Auth-SMTP-From", ""), h.get("Auth-SMTP-To", "")
            emit("AUTH-SMTP helo=%s from=%s to=%s" % (h.get("Auth-SMTP-Helo"), smtp_from, smtp_to))
            ok = "<alice@example.com>" in smtp_from
        self.send_response(200)
        if ok:
            self.send_header("Auth-Status", "OK")
            self.send_header("Auth-Server", "127.0.0.1")
            self.send_header("Auth-Port", str(BACKEND_PORTS[proto]))
            # The backend always gets the real password.
            self.send_header("Auth-Pass", "secret")
        elif user == "wait":
            self.send_header("Auth-Status", "Try again later")
            self.send_header("Auth-Wait", "0")
            self.send_header("Auth-Error-Code", "451 4.3.0")
        elif user == "badbackend":
            self.send_header("Auth-Status", "OK")
            self.send_header("Auth-Server", "127.0.0.1")
            self.send_header("Auth-Port", str(BACKEND_PORTS[proto]))
            self.send_header("Auth-Pass", "wrong")
        else:
            self.send_header("Auth-Status", "Invalid login or password")
        self.end_headers()


class LineHandler(socketserver.StreamRequestHandler):
    name = "?"

    def send(self, text):
        self.wfile.write(text.encode() + b"\r\n")
        self.wfile.flush()

    def lines(self):
        while True:
            line = self.rfile.readline()
            if not line:
                return
            yield line.decode(errors="replace").rstrip("\r\n")


class ImapBackend(LineHandler):
    def handle(self):
        self.send("* OK backend IMAP ready")
        for line in self.lines():
            emit("IMAP-BACKEND " + line)
            if line.startswith("PROXY "):  # proxy_protocol on: the header, no answer
                continue
            tag, _, rest = line.partition(" ")
            cmd = rest.split(" ")[0].upper()
            if cmd == "LOGIN":
                if rest == 'LOGIN "alice" "secret"':
                    self.send("* CAPABILITY IMAP4rev1")
                    self.send(tag + " OK LOGIN done by the backend")
                else:
                    self.send(tag + " NO [AUTHENTICATIONFAILED] backend says no")
                    return
            elif cmd == "SELECT":
                self.send("* 3 EXISTS")
                self.send("* FLAGS (\\Seen)")
                self.send(tag + " OK [READ-WRITE] SELECT completed")
            elif cmd == "LOGOUT":
                self.send("* BYE backend")
                self.send(tag + " OK LOGOUT completed")
                return
            else:
                self.send(tag + " OK " + cmd + " completed")


class Pop3Backend(LineHandler):
    def handle(self):
        self.send("+OK backend POP3 ready")
        for line in self.lines():
            emit("POP3-BACKEND " + line)
            cmd = line.split(" ")[0].upper()
            if cmd == "USER":
                self.send("+OK")
            elif cmd == "PASS":
                if line == "PASS secret":
                    self.send("+OK maildrop has 2 messages")
                else:
                    self.send("-ERR backend says no")
                    return
            elif cmd == "STAT":
                self.send("+OK 2 320")
            elif cmd == "QUIT":
                self.send("+OK bye")
                return
            else:
                self.send("+OK")


class SmtpBackend(LineHandler):
    def handle(self):
        self.send("220 backend ESMTP")
        in_data = False
        for line in self.lines():
            if in_data:
                if line == ".":
                    in_data = False
                    emit("SMTP-BACKEND <end of data>")
                    self.send("250 2.0.0 queued")
                else:
                    emit("SMTP-DATA " + line)
                continue
            emit("SMTP-BACKEND " + line)
            if line.startswith("PROXY "):
                continue
            cmd = line.split(" ")[0].upper()
            if cmd == "EHLO":
                self.send("250-backend")
                self.send("250-XCLIENT ADDR LOGIN NAME")
                self.send("250 8BITMIME")
            elif cmd == "HELO":
                self.send("250 backend")
            elif cmd == "XCLIENT":
                self.send("220 backend ESMTP again")
            elif cmd == "AUTH":
                self.send("235 2.7.0 ok")
            elif cmd == "DATA":
                in_data = True
                self.send("354 go on")
            elif cmd == "QUIT":
                self.send("221 bye")
                return
            else:
                self.send("250 2.1.0 ok")


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def serve():
    servers = {}
    for name, handler in (("imap", ImapBackend), ("pop3", Pop3Backend), ("smtp", SmtpBackend)):
        srv = Server(("127.0.0.1", 0), handler)
        servers[name] = srv
        BACKEND_PORTS[name] = srv.server_address[1]
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    auth = HTTPServer(("127.0.0.1", 0), AuthHandler)
    threading.Thread(target=auth.serve_forever, daemon=True).start()
    emit("PORTS auth=%d imap=%d pop3=%d smtp=%d" % (auth.server_address[1], BACKEND_PORTS["imap"],
                                                    BACKEND_PORTS["pop3"], BACKEND_PORTS["smtp"]))
    threading.Event().wait()


def check(cond, what):
    if not cond:
        raise SystemExit("FAILED: " + what)


def tls_context():
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def imap_login(port, tls=None, cert=None):
    ctx = tls_context()
    if cert:
        ctx.load_cert_chain(cert[0], cert[1])
    if tls == "ssl":
        m = imaplib.IMAP4_SSL("127.0.0.1", port, ssl_context=ctx)
    else:
        m = imaplib.IMAP4("127.0.0.1", port)
    check("IMAP4REV1" in m.capabilities, "capabilities %r" % (m.capabilities,))
    if tls == "starttls":
        check("STARTTLS" in m.capabilities, "STARTTLS advertised")
        typ, _ = m.starttls(ssl_context=ctx)
        check(typ == "OK", "starttls")
    typ, data = m.login("alice", "secret")
    check(typ == "OK", "login %r" % (data,))
    check(b"done by the backend" in data[0], "the backend's answer %r" % (data,))
    typ, data = m.select("INBOX")
    check(typ == "OK" and data[0] == b"3", "select %r %r" % (typ, data))
    typ, _ = m.noop()
    check(typ == "OK", "noop")
    m.logout()


class ImapWithProxyHeader(imaplib.IMAP4):
    """imaplib over a connection that starts with a PROXY protocol header."""
    header = b""

    def _create_socket(self, timeout):
        sock = super()._create_socket(timeout)
        sock.sendall(self.header)
        return sock


def scenario(name, port, args):
    if name == "imap":
        imap_login(port)
    elif name == "imap_proxy_protocol":
        # args: the header, with "\\r\\n" for its CRLF.
        ImapWithProxyHeader.header = args[0].replace("\\r\\n", "\r\n").encode()
        m = ImapWithProxyHeader("127.0.0.1", port)
        typ, data = m.login("alice", "secret")
        check(typ == "OK", "login %r" % (data,))
        m.logout()
    elif name == "imap_ssl":
        imap_login(port, "ssl")
    elif name == "imap_starttls":
        imap_login(port, "starttls", args if args else None)
    elif name == "imap_ssl_cert":
        # args: the client's certificate and key files.
        imap_login(port, "ssl", args)
    elif name == "ssl_refused":
        # args: the one line expected instead of the greeting, [certificate, key].
        ctx = tls_context()
        if len(args) > 1:
            ctx.load_cert_chain(args[1], args[2])
        c = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)))
        f = c.makefile("rb")
        line = f.readline()
        check(line == args[0].encode() + b"\r\n", "greeting %r" % line)
        check(f.readline() == b"", "closed")
    elif name == "imap_authenticate":
        # AUTHENTICATE PLAIN through imaplib's authenticate().
        m = imaplib.IMAP4("127.0.0.1", port)
        typ, _ = m.authenticate("PLAIN", lambda _: b"\0alice\0secret")
        check(typ == "OK", "authenticate plain")
        m.logout()
    elif name == "imap_cram":
        m = imaplib.IMAP4("127.0.0.1", port)
        check("AUTH=CRAM-MD5" in m.capabilities, "AUTH=CRAM-MD5 advertised")
        typ, _ = m.login_cram_md5("alice", "secret")
        check(typ == "OK", "cram-md5")
        m.logout()
    elif name == "imap_bad_login":
        m = imaplib.IMAP4("127.0.0.1", port)
        try:
            m.login("alice", "wrong")
            check(False, "the login must fail")
        except imaplib.IMAP4.error as e:
            check("Invalid login or password" in str(e), "the auth server's words: %s" % e)
        # No Auth-Wait: the proxy has closed the connection.
        try:
            m.noop()
            check(False, "the connection must be closed")
        except (imaplib.IMAP4.abort, OSError):
            pass
    elif name == "imap_wait_retry":
        m = imaplib.IMAP4("127.0.0.1", port)
        try:
            m.login("wait", "x")
            check(False, "the login must fail")
        except imaplib.IMAP4.error as e:
            check("Try again later" in str(e), "Auth-Status text: %s" % e)
        typ, _ = m.login("alice", "secret")
        check(typ == "OK", "the second attempt")
        m.logout()
    elif name == "imap_backend_refuses":
        m = imaplib.IMAP4("127.0.0.1", port)
        try:
            m.login("badbackend", "secret")
            check(False, "the login must fail")
        except (imaplib.IMAP4.error, imaplib.IMAP4.abort) as e:
            expect = args[0] if args else "internal server error"
            check(expect in str(e), "%r in %s" % (expect, e))
    elif name == "pop3":
        p = poplib.POP3("127.0.0.1", port)
        check(p.getwelcome().startswith(b"+OK"), "welcome")
        caps = p.capa()
        check("USER" in caps, "capa %r" % caps)
        p.user("alice")
        resp = p.pass_("secret")
        check(b"maildrop has 2" in resp, "the backend's answer %r" % resp)
        check(p.stat() == (2, 320), "stat")
        p.quit()
    elif name == "pop3_apop":
        p = poplib.POP3("127.0.0.1", port)
        check(b"<" in p.getwelcome(), "APOP salt in the greeting %r" % p.getwelcome())
        p.apop("alice", "secret")
        check(p.stat() == (2, 320), "stat")
        p.quit()
    elif name == "pop3_bad_login":
        p = poplib.POP3("127.0.0.1", port)
        p.user("bob")
        try:
            p.pass_("nope")
            check(False, "the login must fail")
        except poplib.error_proto as e:
            check("Invalid login or password" in str(e), str(e))
    elif name == "pop3_stls":
        p = poplib.POP3("127.0.0.1", port)
        check("STLS" in p.capa(), "STLS advertised")
        p.stls(context=tls_context())
        p.user("alice")
        p.pass_("secret")
        check(p.stat() == (2, 320), "stat")
        p.quit()
    elif name in ("smtp", "smtp_login", "smtp_starttls", "smtp_ssl"):
        if name == "smtp_ssl":
            s = smtplib.SMTP_SSL("127.0.0.1", port, context=tls_context())
        else:
            s = smtplib.SMTP("127.0.0.1", port)
        s.ehlo("client.example")
        if name == "smtp_starttls":
            check(s.has_extn("starttls"), "STARTTLS advertised")
            s.starttls(context=tls_context())
            s.ehlo("client.example")
        check(s.has_extn("auth"), "AUTH advertised %r" % (s.esmtp_features,))
        if name == "smtp_login":
            s.user, s.password = "alice", "secret"
            code, resp = s.auth("LOGIN", s.auth_login, initial_response_ok=False)
        else:
            code, resp = s.login("alice", "secret")
        check(code == 235, "auth %r %r" % (code, resp))
        s.sendmail("alice@example.com", ["bob@example.com"], "Subject: hi\r\n\r\nhello through vigil\r\n")
        s.quit()
    elif name == "smtp_bad_login":
        s = smtplib.SMTP("127.0.0.1", port)
        s.ehlo("client.example")
        s.user, s.password = "alice", "wrong"
        try:
            s.auth("PLAIN", s.auth_plain)
            check(False, "the login must fail")
        except smtplib.SMTPAuthenticationError as e:
            check(e.smtp_code == 535, "code %r" % (e.smtp_code,))
        # No Auth-Wait: the proxy has closed the connection.
        try:
            s.noop()
            check(False, "the connection must be closed")
        except (smtplib.SMTPServerDisconnected, OSError):
            pass
    elif name == "smtp_wait":
        s = smtplib.SMTP("127.0.0.1", port)
        s.ehlo("client.example")
        try:
            s.login("wait", "x")
            check(False, "the login must fail")
        except smtplib.SMTPResponseException as e:
            check(e.smtp_code == 451, "Auth-Error-Code: %r" % (e.smtp_code,))
        code, _ = s.login("alice", "secret")
        check(code == 235, "second attempt")
        s.quit()
    elif name == "smtp_none":
        # smtp_auth none: MAIL and RCPT without AUTH; the backend's answer to
        # RCPT comes back, then the message goes through.
        s = smtplib.SMTP("127.0.0.1", port)
        s.ehlo("client.example")
        code, resp = s.mail("alice@example.com")
        check(code == 250, "MAIL: %r %r" % (code, resp))
        code, resp = s.rcpt("bob@example.com")
        check(code == 250 and b"2.1.0 ok" in resp, "RCPT, the backend's answer: %r %r" % (code, resp))
        code, resp = s.data("Subject: hi\r\n\r\nhello without auth\r\n")
        check(code == 250, "DATA: %r %r" % (code, resp))
        s.quit()
    elif name == "smtp_none_refused":
        s = smtplib.SMTP("127.0.0.1", port)
        s.ehlo("client.example")
        code, _ = s.rcpt("bob@example.com")
        check(code == 503, "RCPT before MAIL: %r" % code)
        code, _ = s.mail("mallory@example.com")
        check(code == 250, "MAIL: %r" % code)
        code, resp = s.rcpt("bob@example.com")
        check(code == 535, "the auth server refused the envelope: %r %r" % (code, resp))
    elif name == "imap_literal":
        # LOGIN with literals (RFC 3501 §4.3): a synchronizing one for the
        # user, a non-synchronizing one (RFC 7888) for the password.
        c = socket.create_connection(("127.0.0.1", port))
        f = c.makefile("rb")
        check(f.readline().startswith(b"* OK"), "greeting")
        c.sendall(b"a1 LOGIN {5}\r\n")
        line = f.readline()
        check(line == b"+ go ahead\r\n", "continuation %r" % line)
        c.sendall(b"alice {6+}\r\nsecret\r\n")
        line = f.readline()
        check(line.startswith(b"a1 OK") and b"done by the backend" in line, "login %r" % line)
        c.sendall(b"a2 LOGOUT\r\n")
        check(f.readline().startswith(b"* BYE"), "bye")
    elif name == "imap_literal_too_long":
        c = socket.create_connection(("127.0.0.1", port))
        f = c.makefile("rb")
        check(f.readline().startswith(b"* OK"), "greeting")
        c.sendall(b"a1 LOGIN {100000}\r\n")
        line = f.readline()
        check(line == b"a1 BAD line is too long\r\n", "answer %r" % line)
        check(f.readline() == b"", "closed")
    elif name == "smtp_mail_before_auth":
        s = smtplib.SMTP("127.0.0.1", port)
        s.ehlo("client.example")
        code, _ = s.mail("alice@example.com")
        check(code == 530, "MAIL before AUTH: %r" % code)
        s.quit()
    else:
        raise SystemExit("unknown scenario " + name)
    print(name.upper() + " OK")


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "serve":
        serve()
        return
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    socket.setdefaulttimeout(10)
    scenario(sys.argv[1], int(sys.argv[2]), sys.argv[3:])


if __name__ == "__main__":
    main()
