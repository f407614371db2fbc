#!/usr/bin/env bash
# Installs this build into a temporary prefix, then builds examples/ against
# the installed package twice — with find_package(vigil) and with pkg-config —
# and runs the echo example from each build for one round trip.
#   install_test.sh <build dir> <source dir> [sanitizer flags]
set -euo pipefail
build=$1 src=$2 san=${3:-}
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

fail() { echo "install_test: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; fail "cmake --install failed"; }
for f in include/vigil/event/loop.h include/vigil/core/log.h bin/vigil; do
  [ -e "$prefix/$f" ] || fail "missing $f after install"
done
libdir=$(dirname "$(find "$prefix" -name 'libvigil_event.*' | head -n 1)")
[ -n "$libdir" ] && [ -d "$libdir" ] || fail "libvigil_event not installed"
[ -f "$libdir/cmake/vigil/vigilConfig.cmake" ] || fail "vigilConfig.cmake not installed"
[ -f "$libdir/pkgconfig/vigil.pc" ] || fail "vigil.pc not installed"
# Internal headers stay inside the build tree.
[ ! -e "$prefix/include/core" ] && [ ! -e "$prefix/include/http" ] || fail "internal headers were installed"
"$prefix/bin/vigil" -v 2>&1 | grep -q '^vigil version: vigil/' || fail "installed vigil -v"

# Runs the echo example at $1 and checks one round trip through it.
echo_round_trip() {
  # Its own output file, there before the loop reads it: with one shared file
  # the loop could read the previous run's port before the new run truncated
  # it (connection refused), or find no file yet (sed fails under set -e).
  local exe=$1 out
  out=$tmp/$(basename "$exe").out
  : >"$out"
  "$exe" 127.0.0.1:0 >"$out" 2>&1 &
  local pid=$! port=""
  for _ in $(seq 1 200); do
    port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$out")
    [ -n "$port" ] && break
    kill -0 $pid 2>/dev/null || { cat "$out"; fail "$exe exited"; }
    sleep 0.05
  done
  [ -n "$port" ] || { cat "$out"; fail "$exe did not report its port"; }
  exec 3<>"/dev/tcp/127.0.0.1/$port"
  printf 'hello from the installed package\n' >&3
  local line
  IFS= read -r -t 10 line <&3 || fail "no echo from $exe"
  exec 3<&-
  kill $pid; wait $pid 2>/dev/null || true
  [ "$line" = "hello from the installed package" ] || fail "echo returned '$line'"
}

# 1. CMake: find_package(vigil), the examples' own CMakeLists.txt.
cmake -S "$src/examples" -B "$tmp/cmake-build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_CXX_FLAGS="$san" -DCMAKE_EXE_LINKER_FLAGS="$san" >"$tmp/cfg.log" 2>&1 ||
  { cat "$tmp/cfg.log"; fail "configuring examples against the package failed"; }
cmake --build "$tmp/cmake-build" >"$tmp/build.log" 2>&1 ||
  { cat "$tmp/build.log"; fail "building examples against the package failed"; }
echo_round_trip "$tmp/cmake-build/echo_server"

# 2. pkg-config: a plain compiler command line.
export PKG_CONFIG_PATH=$libdir/pkgconfig
pkg-config --exists vigil || fail "pkg-config does not find vigil"
[ "$(pkg-config --modversion vigil)" = "$(sed -n 's/^project(vigil VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")" ] ||
  fail "pkg-config version differs from project(VERSION)"
# shellcheck disable=SC2046
c++ $san "$src/examples/echo_server.cc" -o "$tmp/echo_pc" $(pkg-config --cflags --libs --static vigil) ||
  fail "building with pkg-config failed"
echo_round_trip "$tmp/echo_pc"
echo "install_test: ok"
