#!/usr/bin/env bash
# Installs the build into a temporary prefix, then builds a consumer and the
# example program of docs/api.md with find_package(hsr) and again with
# pkg-config, and runs them; the installed libhsr.so exports exactly the
# program API (tests/abi_exports.sh).
set -eu
build=$1; src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
# the first ```c block of docs/api.md
awk '/^```c$/ {on = 1; next} /^```$/ && on {exit} on' "$src/docs/api.md" > "$tmp/example.c"
grep -q 'int main' "$tmp/example.c" || { echo "install_test: docs/api.md has no \`\`\`c block with a main"; exit 1; }
cmake -S "$src/tests/consumer" -B "$tmp/cb" -DCMAKE_PREFIX_PATH="$tmp/prefix" -DHSR_API_EXAMPLE="$tmp/example.c" >/dev/null
cmake --build "$tmp/cb" >/dev/null
libdir=$(ls -d "$tmp"/prefix/lib*/pkgconfig | head -1)
libdir=$(dirname "$libdir")
LD_LIBRARY_PATH="$libdir:${LD_LIBRARY_PATH:-}" "$tmp/cb/consumer"
"$tmp/cb/consumer_static"
LD_LIBRARY_PATH="$libdir:${LD_LIBRARY_PATH:-}" "$tmp/cb/api_example" "$tmp/ckpt_cmake"
PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --exists hsr
cc -o "$tmp/pc" "$src/tests/consumer/main.c" $(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs hsr)
LD_LIBRARY_PATH="$libdir:${LD_LIBRARY_PATH:-}" "$tmp/pc"
cc -std=c11 -Wall -Wextra -Werror -o "$tmp/pc_example" "$tmp/example.c" \
  $(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs hsr)
LD_LIBRARY_PATH="$libdir:${LD_LIBRARY_PATH:-}" "$tmp/pc_example" "$tmp/ckpt_pc"
[ -f "$tmp/ckpt_pc/latest" ] || { echo "install_test: the example wrote no checkpoint"; exit 1; }
"$src/tests/abi_exports.sh" "$libdir/libhsr.so" "$src"
"$tmp/prefix/bin/hsr-run" --dry-run -n 2 -- true | grep -q "mpirun -n 2"
echo "install_test: find_package(hsr), pkg-config hsr, docs/api.md's example and hsr-run all work from the install"
