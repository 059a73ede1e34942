# Sourced by hsr's shell scripts (bench/*.sh, scripts/*.sh): checks of flag
# values and HSR_* variables that exit 2 naming the flag or variable and what
# is valid, before the script does any work. The variables' kinds and ranges
# are the registry's (common/env_table.c, `hsr env`); tests/cli_walk.sh checks
# both. The caller sets $prog.

ac_die() {
  echo "$prog: $*" >&2
  echo "(see '$prog --help')" >&2
  exit 2
}

# ac_need FLAG ARGS-LEFT VALUE: FLAG was given a value, and it is not empty.
ac_need() { [ "$2" -ge 2 ] && [ -n "$3" ] || ac_die "$1 needs a value"; }

# ac_int WHAT VALUE MIN MAX: a decimal integer in [MIN, MAX] (at most 9 digits).
ac_int() {
  [[ "$2" =~ ^[0-9]{1,9}$ ]] && [ "$((10#$2))" -ge "$3" ] && [ "$((10#$2))" -le "$4" ] ||
    ac_die "$1 must be an integer from $3 to $4 (got '$2')"
}

# ac_num WHAT VALUE: a number above 0 (1.5, 3e-4).
ac_num() {
  [[ "$2" =~ ^([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$ ]] && [[ ! "$2" =~ ^[0.]+([eE].*)?$ ]] ||
    ac_die "$1 must be a number above 0 (got '$2')"
}

# ac_size WHAT VALUE: bytes above 0 with an optional K/M/G suffix, as hsr bench takes them.
ac_size() {
  [[ "$2" =~ ^[0-9]{1,15}[KMGkmg]?$ ]] && [[ ! "$2" =~ ^0+[KMGkmg]?$ ]] ||
    ac_die "$1 must be a size above 0 such as 4096, 64K, 64M or 1G (got '$2')"
}

# ac_choice WHAT VALUE A|B|C
ac_choice() {
  local IFS='|' c
  for c in $3; do [ "$2" = "$c" ] && return 0; done
  ac_die "$1 '$2' is not valid (valid: $3)"
}

# ac_env_choice NAME A|B|C: a registry CHOICE, which any case spells (as
# `hsr env --check` judges it); NAME is set to the list's own spelling, the
# one the script then passes on (CMake compares ON/OFF/AUTO as written).
ac_env_choice() {
  local IFS='|' c v=${!1}
  for c in $2; do [ "${v,,}" = "${c,,}" ] && { printf -v "$1" '%s' "$c"; return 0; }; done
  ac_die "$1 '$v' is not valid (valid: $2)"
}

# ac_rate WHAT VALUE: a tc rate above zero (1gbit, 200mbit).
ac_rate() {
  [[ "$2" =~ ^[0-9]+(\.[0-9]+)?([kmgt]?bit|[kmgt]?bps)$ ]] ||
    ac_die "$1 '$2': expected a tc rate: a number and bit, kbit, mbit, gbit, tbit, bps, kbps, mbps, gbps or tbps (e.g. 1gbit)"
  [[ "$2" =~ ^0+(\.0+)?[a-z]+$ ]] && ac_die "$1 '$2': the rate must be above zero"
  return 0
}

# ac_dir WHAT VALUE: an existing directory; ac_newdir: one that is made when
# missing (an existing path must be a directory).
ac_dir() { [ -d "$2" ] || ac_die "$1 '$2' is not a directory"; }
ac_newdir() { [ ! -e "$2" ] || [ -d "$2" ] || ac_die "$1 '$2' exists and is not a directory"; }

# ac_env KIND NAME ARGS...: when NAME is set it must be valid for KIND (int MIN
# MAX, choice LIST, dir, newdir, args); set but empty is an error.
ac_env() {
  local kind=$1 name=$2
  shift 2
  [ -n "${!name+set}" ] || return 0
  [ -n "${!name}" ] || ac_die "$name is set but empty (unset it for the default)"
  case "$kind" in
    int) ac_int "$name" "${!name}" "$1" "$2" ;;
    choice) ac_env_choice "$name" "$1" ;;
    dir) ac_dir "$name" "${!name}" ;;
    newdir) ac_newdir "$name" "${!name}" ;;
    args) ;;
  esac
}
