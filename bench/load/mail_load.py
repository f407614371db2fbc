#!/usr/bin/env python3
"""The mail benchmark's IMAP peers (bench/load/mail_vs_nginx.sh), asyncio
protocols without stream objects so that they stay cheap per session, on
uvloop when it is installed (Debian: python3-uvloop).

  mail_load.py backend PORT
      An IMAP server: "* OK", LOGIN (quoted strings or literals, as Vigil and
      nginx send them), SELECT, FETCH of one 100 KiB message, LOGOUT. Prints
      "ready" once listening; runs until killed.
  mail_load.py client PORT CONCURRENCY SECONDS
      CONCURRENCY sessions at a time for SECONDS (each: greeting, LOGIN,
      SELECT, FETCH 1 BODY[] of 100 KiB, LOGOUT, close), a new one as soon as
      one ends. Prints "sessions N failed F seconds S".
  mail_load.py idle PORT COUNT
      Opens COUNT sessions, logs each in (so each is relayed to the backend)
      and prints "ready N" once all are; holds them until its stdin closes.
Everything on 127.0.0.1; every loop is bounded in count or time.
"""

import asyncio
import resource
import sys
import time

MESSAGE = (b"Subject: bench\r\n\r\n" + b"x" * 78 + b"\r\n") * 1280  # 102,400 bytes + headers
MESSAGE = MESSAGE[:102400]


def loop_policy():
    try:
        import uvloop  # noqa: PLC0415

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    except ImportError:
        pass


class Backend(asyncio.Protocol):
    def connection_made(self, transport):
        self.t = transport
        self.buf = b""
        self.need = 0  # bytes of a literal still to come
        self.line = b""  # the command so far (before its literals end)
        transport.write(b"* OK IMAP4rev1 bench backend ready\r\n")

    def data_received(self, data):
        self.buf += data
        while True:
            if self.need:
                if len(self.buf) < self.need:
                    return
                self.line += b'"' + self.buf[: self.need] + b'"'
                self.buf = self.buf[self.need :]
                self.need = 0
            i = self.buf.find(b"\r\n")
            if i < 0:
                if len(self.buf) > 65536:
                    self.t.close()
                return
            part, self.buf = self.buf[:i], self.buf[i + 2 :]
            if part.endswith(b"}") and b"{" in part:
                j = part.rfind(b"{")
                n = part[j + 1 : -1].rstrip(b"+")
                if n.isdigit():
                    self.line += part[:j]
                    self.need = int(n)
                    if not part.endswith(b"+}"):
                        self.t.write(b"+ go ahead\r\n")
                    continue
            line, self.line = self.line + part, b""
            self.command(line)

    def command(self, line):
        words = line.split(b" ", 2)
        if len(words) < 2:
            self.t.write(b"* BAD\r\n")
            return
        tag, verb = words[0], words[1].upper()
        if verb == b"LOGIN":
            self.t.write(tag + b" OK LOGIN completed\r\n")
        elif verb == b"SELECT":
            self.t.write(b"* 1 EXISTS\r\n* 0 RECENT\r\n* FLAGS (\\Seen)\r\n" + tag + b" OK [READ-WRITE] SELECT completed\r\n")
        elif verb == b"FETCH":
            self.t.write(b"* 1 FETCH (BODY[] {%d}\r\n" % len(MESSAGE) + MESSAGE + b")\r\n" + tag + b" OK FETCH completed\r\n")
        elif verb == b"LOGOUT":
            self.t.write(b"* BYE\r\n" + tag + b" OK LOGOUT completed\r\n")
            self.t.close()
        else:
            self.t.write(tag + b" BAD unknown\r\n")


STEPS = [
    (b"* OK", b"a LOGIN bench secret\r\n"),
    (b"a OK", b"b SELECT INBOX\r\n"),
    (b"b OK", b"c FETCH 1 BODY[]\r\n"),
    (b"c OK", b"d LOGOUT\r\n"),
    (b"d OK", None),
]


class Client(asyncio.Protocol):
    """One session; `done` gets True (completed) or False."""

    def __init__(self, done, steps):
        self.done = done
        self.steps = steps
        self.step = 0
        self.tail = b"\r\n"  # the last bytes seen, for a match across reads

    def connection_made(self, transport):
        self.t = transport

    def data_received(self, data):
        seen = self.tail + data
        want = b"\r\n" + self.steps[self.step][0]
        if want not in seen:
            self.tail = seen[-len(want) :]
            return
        send = self.steps[self.step][1]
        self.step += 1
        self.tail = b"\r\n"
        if send is None or self.step == len(self.steps):
            if send is not None:
                self.t.write(send)
            if not self.done.done():
                self.done.set_result(True)
            if self.steps is STEPS:
                self.t.close()
            return
        self.t.write(send)

    def connection_lost(self, exc):
        if not self.done.done():
            self.done.set_result(False)


async def one_session(loop, port, steps=STEPS):
    done = loop.create_future()
    try:
        t, _ = await loop.create_connection(lambda: Client(done, steps), "127.0.0.1", port)
    except OSError:
        return False, None
    try:
        ok = await asyncio.wait_for(done, 30)
    except asyncio.TimeoutError:
        ok = False
    return ok, t


async def client(port, conc, seconds):
    loop = asyncio.get_running_loop()
    end = time.monotonic() + seconds
    counts = [0, 0]

    async def worker():
        while time.monotonic() < end:
            ok, t = await one_session(loop, port)
            counts[0 if ok else 1] += 1
            if t is not None:
                t.close()
            if not ok:
                await asyncio.sleep(0.01)

    start = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(conc)))
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(
        f"sessions {counts[0]} failed {counts[1]} seconds {time.monotonic() - start:.3f}"
        f" cpu {ru.ru_utime + ru.ru_stime:.3f}",
        flush=True,
    )


async def idle(port, count):
    loop = asyncio.get_running_loop()
    steps = [(b"* OK", b"a LOGIN bench secret\r\n"), (b"a OK", None)]
    held = []
    for i in range(0, count, 100):
        batch = await asyncio.gather(*(one_session(loop, port, steps) for _ in range(min(100, count - i))))
        held += [t for ok, t in batch if ok]
    print(f"ready {len(held)}", flush=True)
    await loop.run_in_executor(None, sys.stdin.read)
    for t in held:
        t.close()


async def backend(port):
    loop = asyncio.get_running_loop()
    server = await loop.create_server(Backend, "127.0.0.1", port, backlog=4096)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


def main():
    loop_policy()
    mode, port = sys.argv[1], int(sys.argv[2])
    if mode == "backend":
        asyncio.run(backend(port))
    elif mode == "client":
        asyncio.run(client(port, int(sys.argv[3]), float(sys.argv[4])))
    elif mode == "idle":
        asyncio.run(idle(port, int(sys.argv[3])))
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
