#!/usr/bin/env bash
# env_registry.sh HSR SRC: the HSR_* registry (common/env_table.c), the
# docs and the source tree agree:
#   1. docs/environment.md's complete variable table is `hsr env --markdown`,
#      verbatim (between <!-- hsr env --markdown --> and <!-- end hsr env -->);
#   2. every HSR_* name in the first column of any table of README.md or
#      docs/*.md is registered (but the CMake options' table: -D settings);
#   3. every HSR_* variable the tree reads (getenv, the env_* readers, a
#      script's $HSR_X or ac_env) is registered, and every registered one is
#      read somewhere (no stale rows).
set -u
hsr=$1 src=$2
rc=0
fail() { echo "env_registry: $*"; rc=1; }
reg=$("$hsr" env --json | jq -r '.variables[].name' | sort -u) || { echo "env_registry: hsr env --json failed"; exit 1; }
[ -n "$reg" ] || { echo "env_registry: empty registry"; exit 1; }

# 1. the generated table
want=$("$hsr" env --markdown)
have=$(sed -n '/^<!-- hsr env --markdown -->$/,/^<!-- end hsr env -->$/p' "$src/docs/environment.md" | sed '1d;$d')
if [ "$want" != "$have" ]; then
  fail "docs/environment.md's variable table is not 'hsr env --markdown' (regenerate it between the markers):"
  diff <(echo "$want") <(echo "$have") | head -20
fi

# 2. names in the docs' tables (but the CMake options' table: those are -D settings)
readme=$(awk '/^## Build options/ {skip = 1; next} /^## / {skip = 0} !skip' "$src/README.md" "$src"/docs/*.md |
  grep -oE '^\| `HSR_[A-Z0-9_]+`(, `HSR_[A-Z0-9_]+`)*' | grep -oE 'HSR_[A-Z0-9_]+' | sort -u)
extra=$(comm -23 <(echo "$readme") <(echo "$reg"))
[ -z "$extra" ] || fail "tables in README.md or docs/ list variables hsr does not read (not in the registry): $(echo $extra)"

# 3. what the tree reads
cd "$src" || exit 1
read_c=$(grep -rhoE '(getenv|env_[a-z_]+)\("HSR_[A-Z0-9_]+"' --include=*.c --include=*.h --include=*.cu \
  common launch kernels topology collectives runtime tune ft tools bench examples | grep -oE 'HSR_[A-Z0-9_]+')
read_sh=$(grep -hoE '\$\{?HSR_[A-Z0-9_]+|ac_env [a-z]+ HSR_[A-Z0-9_]+|for v in (HSR_[A-Z0-9_]+ ?)+' \
  tools/hsr-run tools/hsr-bind bench/*.sh scripts/*.sh | grep -oE 'HSR_[A-Z0-9_]+')
read_all=$(printf '%s\n%s\n' "$read_c" "$read_sh" | sort -u)
unreg=$(comm -23 <(echo "$read_all") <(echo "$reg"))
[ -z "$unreg" ] || fail "read but not registered (add a row to common/env_table.c): $(echo $unreg)"
stale=$(comm -13 <(echo "$read_all") <(echo "$reg"))
[ -z "$stale" ] || fail "registered but read nowhere: $(echo $stale)"
[ $rc = 0 ] && echo "env_registry: $(echo "$reg" | wc -l) variables: docs/environment.md's table = hsr env --markdown, every one read, nothing read unregistered"
exit $rc
