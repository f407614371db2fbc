#!/bin/bash
# Runs nginx-tests' HTTP/2 and gRPC files as they were for nginx 1.22.1, with
# a client that opens the connection as RFC 9113 §3.4 requires, against
# vigil and nginx (through nginx-tests.sh).
#
#   bench/compat/nginx-tests-h2.sh NGINX_TESTS OUT_DIR [file.t ...]
#
# NGINX_TESTS  a git checkout of nginx/nginx-tests (its history is used; the
#              checkout itself is not changed)
# OUT_DIR      as for nginx-tests.sh; the tests are checked out under
#              OUT_DIR/tests
# file.t ...   default: every h2*.t and grpc*.t, and worker_shutdown_timeout_h2.t
#
# Two things differ from running nginx-tests.sh on today's checkout:
# - The tests are those of the last commit before nginx 1.22.1's release
#   (REV, default: the last commit before 2022-10-20). Later files configure
#   HTTP/2 with nginx 1.25's `http2 on`, which nginx 1.22.1 refuses, so
#   neither binary can run them.
# - Test::Nginx::HTTP2 sends its connection preface without the SETTINGS
#   frame that must follow it; nginx accepts that, Vigil answers with a
#   PROTOCOL_ERROR as the RFC says (docs/compatibility.md). The copy here
#   sends an empty SETTINGS frame after the preface, unless a test gives its
#   own preface or asks for a bare connection (`pure`). nginx passes the same
#   assertions with and without the change.
# Environment: as nginx-tests.sh, and REV.

set -u
if [ $# -lt 2 ]; then
    sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
SRC=$(cd "$1" && pwd) || exit 2
OUT=$2; shift 2
here=$(cd "$(dirname "$0")" && pwd)
REV=${REV:-$(git -C "$SRC" rev-list -1 --before=2022-10-20 HEAD)} || exit 2
[ -n "$REV" ] || { echo "nginx-tests-h2.sh: no commit of $SRC before 2022-10-20" >&2; exit 2; }

rm -rf "$OUT"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
T=$OUT/tests
mkdir -p "$T"
git -C "$SRC" archive "$REV" | tar -x -C "$T" || exit 2
pm=$T/lib/Test/Nginx/HTTP2.pm
grep -q 'return \$self if \$extra{pure};' "$pm" ||
    { echo "nginx-tests-h2.sh: $pm has no 'pure' return to follow" >&2; exit 2; }
sed -i 's/^\(\treturn \$self if \$extra{pure};\)$/\1\n\n\t$self->h2_settings(0) unless defined $extra{preface};/' "$pm"
grep -q 'h2_settings(0) unless' "$pm" || { echo "nginx-tests-h2.sh: could not change $pm" >&2; exit 2; }

if [ $# -eq 0 ]; then
    set -- $(cd "$T" && ls h2*.t grpc*.t worker_shutdown_timeout_h2.t 2>/dev/null)
fi
exec bash "$here/nginx-tests.sh" "$T" "$OUT/run" "$@"
