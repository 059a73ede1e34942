#!/usr/bin/env bash
# libhsr.so exports exactly the public API: every dynamic symbol it defines is
# an hsr_* function declared with HSR_API in include/hsr/*.h, and every such
# declaration is exported. Usage: abi_exports.sh LIBHSR_SO SOURCE_DIR
set -u
lib=$1; src=$2
command -v nm >/dev/null || { echo "abi_exports: nm not found (binutils): skipping"; exit 77; }
exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | sed 's/@.*//' | sort -u)
declared=$(grep -hoE '^HSR_API [^(]*\bhsr_[a-z0-9_]+\(' "$src"/include/hsr/*.h | grep -oE 'hsr_[a-z0-9_]+\($' | tr -d '(' | sort -u)
rc=0
extra=$(comm -23 <(echo "$exported") <(echo "$declared"))
missing=$(comm -13 <(echo "$exported") <(echo "$declared"))
if [ -n "$extra" ]; then
  echo "exported but not public API (declare with HSR_API in include/hsr, or make it internal):"; echo "$extra" | sed 's/^/  /'; rc=1
fi
if [ -n "$missing" ]; then
  echo "declared HSR_API but not exported (not defined, or not built):"; echo "$missing" | sed 's/^/  /'; rc=1
fi
[ $rc = 0 ] && echo "abi_exports: $(echo "$exported" | wc -l) symbols, all public API"
exit $rc
