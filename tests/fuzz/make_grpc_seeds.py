#!/usr/bin/python3
"""Writes the seeds of grpc_frames_fuzz (tests/fuzz/corpus/grpc_frames_fuzz/):
what gRPC backends send for stream 1 after our preface. Each file is one
control byte (the piece size the target also feeds in) and the frames.

    make_grpc_seeds.py [DIR]
"""
import os
import struct
import sys


def frame(ftype, flags, sid, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", sid) + payload


SETTINGS = frame(4, 0, 0, struct.pack(">HI", 4, 65535) + struct.pack(">HI", 5, 16384))
SETTINGS_ACK = frame(4, 1, 0, b"")
# :status 200, content-type application/grpc (Huffman, no padding)
HEAD = b"\x88\x5f\x8b\x1du\xd0b\x0d&=LMed"
# grpc-status: 0, grpc-message: "" (literal names)
TRAILERS = b"\x00\x0bgrpc-status\x010" + b"\x00\x0cgrpc-message\x00"
MSG = b"\x00\x00\x00\x00\x05hello"

SEEDS = {
    "unary": SETTINGS + SETTINGS_ACK + frame(1, 4, 1, HEAD) + frame(0, 0, 1, MSG)
    + frame(1, 5, 1, TRAILERS),
    "trailers_only": SETTINGS + frame(1, 5, 1, HEAD + TRAILERS),
    "continuation": SETTINGS + frame(1, 0, 1, HEAD[:5]) + frame(9, 4, 1, HEAD[5:])
    + frame(0, 1, 1, MSG),
    "padded_priority": SETTINGS + frame(1, 0x4 | 0x8 | 0x20, 1, b"\x03" + b"\x00\x00\x00\x00\x10" + HEAD + b"\x00" * 3)
    + frame(0, 0x8 | 0x1, 1, b"\x02" + MSG + b"\x00\x00"),
    "interim": frame(1, 4, 1, b"\x08\x03" + b"103") + frame(1, 4, 1, HEAD) + frame(0, 1, 1, MSG),
    "control": SETTINGS + frame(6, 0, 0, b"12345678") + frame(8, 0, 0, struct.pack(">I", 1000))
    + frame(8, 0, 1, struct.pack(">I", 1000)) + frame(1, 4, 1, HEAD) + frame(0, 0, 3, MSG)
    + frame(0, 0, 1, MSG) + frame(3, 0, 1, struct.pack(">I", 0)),
    "goaway": SETTINGS + frame(7, 0, 0, struct.pack(">II", 1, 0) + b"debug") + frame(1, 5, 1, HEAD),
    "length": SETTINGS + frame(1, 4, 1, HEAD + b"\x5c\x0210") + frame(0, 1, 1, b"0123456789"),
    "indexed": SETTINGS + frame(1, 4, 1, b"\x88\x40\x01a\x01b\xbe") + frame(0, 1, 1, b"x"),
}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "corpus", "grpc_frames_fuzz")
    os.makedirs(out, exist_ok=True)
    for name, data in SEEDS.items():
        for step, suffix in ((0, ""), (7, "_cut7")):
            with open(os.path.join(out, name + suffix), "wb") as f:
                f.write(bytes([step]) + data)


if __name__ == "__main__":
    main()
