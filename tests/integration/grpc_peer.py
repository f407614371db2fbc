#!/usr/bin/python3
"""A gRPC peer for the grpc_pass tests (Debian's python3-grpcio, no protoc:
generic handlers with bytes in and out).

  grpc_peer.py server [--tls CERT KEY]
      serves test.Echo on 127.0.0.1, an ephemeral port; prints "port N" once
      listening, and runs until it is killed.
  grpc_peer.py raw-server good|bad
      a bare HTTP/2 server on the socket API: answers each request with
      ":status 200" and "content-type: application/grpc" Huffman-coded, its
      padding right ("good") or one whole 0xff byte too long ("bad", what
      nginx-tests' encoder sends; RFC 7541 §5.2 makes it a decoding error).
  grpc_peer.py raw-server record
      as "good", and prints each request's header fields ("h name: value").
  grpc_peer.py raw-server length N
      as "good" with "content-length: N", then DATA "Hello" and " world"
      and trailers (grpc-status 0).
  grpc_peer.py raw-server rst CODE N
      as "length" without a content-length, the trailers and N RST_STREAM
      frames of error CODE after them in one write.
  grpc_peer.py raw-server window
      reads a request body within the default windows (65535), prints each
      DATA frame's length ("data N"), and opens both windows by 10 once the
      first 65535 bytes are in, then by 10 again, and so on to END_STREAM
      ("end").
  grpc_peer.py client TARGET METHOD [options]
      calls /test.Echo/METHOD through TARGET (host:port) and prints one JSON
      object: code, details, messages (as text), initial and trailing metadata.

Methods: Unary (echoes the request; metadata x-* echoed back as initial
metadata "echo-<name>"), Stream (a request "N" gets N messages "m0".."m<N-1>"),
Collect (a client stream; answers the total size and count), Fail (status
INVALID_ARGUMENT, details "bad thing"), Peer (answers the backend's view of
the caller's address: the same for two calls on one connection).
"""
import json
import sys
from concurrent import futures

import grpc


def ident(b):
    return b


def unary(request, context):
    echo = [("echo-" + k, v) for k, v in context.invocation_metadata() if k.startswith("x-")]
    if echo:
        context.send_initial_metadata(tuple(echo))
    context.set_trailing_metadata((("x-trailer", "end"),))
    return request


def stream(request, context):
    for i in range(int(request.decode() or "0")):
        yield ("m%d" % i).encode()


def collect(request_iterator, context):
    total = 0
    count = 0
    for chunk in request_iterator:
        total += len(chunk)
        count += 1
    return ("%d %d" % (total, count)).encode()


def fail(request, context):
    context.abort(grpc.StatusCode.INVALID_ARGUMENT, "bad thing")


def peer(request, context):
    return context.peer().encode()


def serve(args):
    handlers = {
        "Unary": grpc.unary_unary_rpc_method_handler(unary, ident, ident),
        "Stream": grpc.unary_stream_rpc_method_handler(stream, ident, ident),
        "Collect": grpc.stream_unary_rpc_method_handler(collect, ident, ident),
        "Fail": grpc.unary_unary_rpc_method_handler(fail, ident, ident),
        "Peer": grpc.unary_unary_rpc_method_handler(peer, ident, ident),
    }
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("test.Echo", handlers),))
    if args and args[0] == "--tls":
        with open(args[1], "rb") as f:
            cert = f.read()
        with open(args[2], "rb") as f:
            key = f.read()
        port = server.add_secure_port("127.0.0.1:0", grpc.ssl_server_credentials(((key, cert),)))
    else:
        port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print("port %d" % port, flush=True)
    server.wait_for_termination()


def raw_serve(args):
    import socket
    import struct
    # "application/grpc" is 88 bits of Huffman code: 11 bytes, no padding.
    value = b"\x1du\xd0b\x0d&=LMed"
    mode = args[0]
    block = b"\x88\x5f" + (bytes([0x80 | 12]) + value + b"\xff" if mode == "bad"
                          else bytes([0x80 | 11]) + value)
    if mode == "length":
        n = args[1].encode()
        block += b"\x5c" + bytes([len(n)]) + n  # content-length (28), literal
    decoder = None
    if mode == "record":
        import hpack
        decoder = hpack.Decoder()
    got = 0
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    print("port %d" % srv.getsockname()[1], flush=True)
    accepted = 0
    while True:
        c, _ = srv.accept()
        accepted += 1
        print("connection %d" % accepted, flush=True)
        buf = b""
        try:
            while len(buf) < 24:
                buf += c.recv(65536)
            buf = buf[24:]
            c.sendall(b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")  # SETTINGS
            while True:
                while len(buf) < 9 or len(buf) < 9 + int.from_bytes(buf[:3], "big"):
                    data = c.recv(65536)
                    if not data:
                        raise EOFError
                    buf += data
                length = int.from_bytes(buf[:3], "big")
                ftype, flags = buf[3], buf[4]
                sid = struct.unpack(">I", buf[5:9])[0] & 0x7fffffff
                payload = buf[9:9 + length]
                buf = buf[9 + length:]
                if ftype == 4 and not flags & 1:
                    c.sendall(b"\x00\x00\x00\x04\x01\x00\x00\x00\x00")
                if ftype == 1 and decoder is not None:
                    for k, v in decoder.decode(payload):
                        print("h %s: %s" % (k, v), flush=True)
                if mode == "window" and ftype == 0:
                    print("data %d" % length, flush=True)
                    got += length
                    if got >= 65535 and not flags & 1:
                        upd = struct.pack(">I", 10)
                        c.sendall(b"\x00\x00\x04\x08\x00\x00\x00\x00\x00" + upd +
                                  b"\x00\x00\x04\x08\x00" + struct.pack(">I", sid) + upd)
                    if not flags & 1:
                        continue
                    print("end", flush=True)
                    ftype, flags = 1, 1
                if ftype == 1 and flags & 1:
                    frame_sid = struct.pack(">I", sid)
                    if mode in ("length", "rst"):
                        c.sendall(len(block).to_bytes(3, "big") + b"\x01\x04" + frame_sid + block)
                        for part in (b"Hello", b" world"):
                            c.sendall(len(part).to_bytes(3, "big") + b"\x00\x00" + frame_sid +
                                      part)
                        trailers = b"\x40\x0bgrpc-status\x010"
                        end = len(trailers).to_bytes(3, "big") + b"\x01\x05" + frame_sid + trailers
                        if mode == "rst":
                            rst = b"\x00\x00\x04\x03\x00" + frame_sid + struct.pack(">I", int(args[1]))
                            end += rst * int(args[2])
                        c.sendall(end)
                    else:
                        c.sendall(len(block).to_bytes(3, "big") + b"\x01\x05" + frame_sid + block)
        except (EOFError, OSError):
            pass
        c.close()


def call(args):
    target, method = args[0], args[1]
    opts = args[2:]
    payload = b"hello"
    metadata = []
    chunks = None
    ca = None
    name = None
    i = 0
    while i < len(opts):
        o = opts[i]
        if o == "--payload":
            payload = opts[i + 1].encode()
            i += 2
        elif o == "--meta":
            k, v = opts[i + 1].split("=", 1)
            metadata.append((k, v))
            i += 2
        elif o == "--chunks":  # a client stream: COUNT messages of SIZE bytes
            chunks = (int(opts[i + 1]), int(opts[i + 2]))
            i += 3
        elif o == "--ca":
            with open(opts[i + 1], "rb") as f:
                ca = f.read()
            i += 2
        elif o == "--name":
            name = opts[i + 1]
            i += 2
        else:
            raise SystemExit("unknown option " + o)
    if ca is not None:
        options = [("grpc.ssl_target_name_override", name)] if name else []
        channel = grpc.secure_channel(target, grpc.ssl_channel_credentials(ca), options)
    else:
        channel = grpc.insecure_channel(target)
    path = "/test.Echo/" + method
    out = {"code": "OK", "details": "", "messages": [], "initial": {}, "trailing": {}}
    try:
        if method == "Stream":
            call = channel.unary_stream(path, ident, ident)(payload, metadata=metadata, timeout=20)
            for m in call:
                out["messages"].append(m.decode(errors="replace"))
        elif method == "Collect":
            count, size = chunks or (1, len(payload))
            requests = iter([b"x" * size for _ in range(count)])
            m, call = channel.stream_unary(path, ident, ident).with_call(
                requests, metadata=metadata, timeout=20)
            out["messages"].append(m.decode())
        else:
            m, call = channel.unary_unary(path, ident, ident).with_call(
                payload, metadata=metadata, timeout=20)
            out["messages"].append(m.decode(errors="replace"))
        out["initial"] = dict(call.initial_metadata() or ())
        out["trailing"] = dict(call.trailing_metadata() or ())
    except grpc.RpcError as e:
        out["code"] = e.code().name
        out["details"] = e.details() or ""
        try:
            out["trailing"] = dict(e.trailing_metadata() or ())
        except Exception:
            pass
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "server":
        serve(sys.argv[2:])
    elif sys.argv[1] == "raw-server":
        raw_serve(sys.argv[2:])
    else:
        call(sys.argv[2:])
