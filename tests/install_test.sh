#!/usr/bin/env bash
# Installs the build into a temporary prefix, then builds a consumer with
# find_package(hsr) and another with pkg-config, and runs both.
set -eu
build=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
cmake -S "$src/tests/consumer" -B "$tmp/cb" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/cb" >/dev/null
LD_LIBRARY_PATH="$tmp/prefix/lib:${LD_LIBRARY_PATH:-}" "$tmp/cb/consumer"
"$tmp/cb/consumer_static"
libdir=$(ls -d "$tmp"/prefix/lib*/pkgconfig | head -1)
PKG_CONFIG_PATH="$libdir" pkg-config --exists hsr
cc -o "$tmp/pc" "$src/tests/consumer/main.c" $(PKG_CONFIG_PATH="$libdir" pkg-config --cflags --libs hsr)
LD_LIBRARY_PATH="$(dirname "$libdir"):${LD_LIBRARY_PATH:-}" "$tmp/pc"
"$tmp/prefix/bin/hsr-run" --dry-run -n 2 -- true | grep -q "mpirun -n 2"
echo "install_test: find_package(hsr), pkg-config hsr and hsr-run all work from the install"
