#!/usr/bin/env bash
# The system (Debian) packages that hemx's tests and demos use, in one place: `make test`, `make test-fast`,
# `make demo` (for the workloads that read them) and `.ci/run` all run this script.
#
#   package                 what needs it
#   qemu-user               native-kernel tests: the library under emulated x86-64 CPUs (no AVX-512 / no AVX) and aarch64
#   g++-aarch64-linux-gnu   native-kernel tests: the aarch64 cross-build of csrc/
#   clang-14                native-kernel tests: the clang++ build of csrc/
#   dataset-fashion-mnist   hemx.nn's ResNet-20 tests, `hemx bench resnet`, `hemx demo --workload resnet`
#                           (the IDX files under /usr/share/datasets/fashion-mnist)
#
# As root with apt-get, what is missing is installed. Otherwise nothing is installed: the script prints the one
# command to run, and the tests that need a missing package are reported as not run, with that reason (the
# suite's closing lines count them per package, tests/run_suite.py), never as failures.
# With CI set, a package that is still missing fails the script (exit 1): CI must run every test.
#
# Usage: scripts/system-deps.sh [--check]     (--check: only report, never install; exit 1 if something is missing)
set -uo pipefail
cd "$(dirname "$0")/.."

check_only=0
case "${1:-}" in
  "") ;;
  --check) check_only=1 ;;
  -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "system-deps: unknown option ${1} (use --check or nothing)" >&2; exit 2 ;;
esac

have() { command -v "$1" >/dev/null 2>&1; }

# present PACKAGE: whether what the package provides is on this machine
present() {
  case "$1" in
    qemu-user) have qemu-x86_64 && have qemu-aarch64 ;;
    g++-aarch64-linux-gnu) have aarch64-linux-gnu-g++ ;;
    clang-14) have clang++ || have clang++-14 ;;
    dataset-fashion-mnist)
      local d="${HEMX_FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}"
      ls "$d"/t10k-images-idx3-ubyte* >/dev/null 2>&1 && ls "$d"/train-images-idx3-ubyte* >/dev/null 2>&1 ;;
    *) return 1 ;;
  esac
}

PACKAGES=(qemu-user g++-aarch64-linux-gnu clang-14 dataset-fashion-mnist)
missing_list() {
  local out=() p
  for p in "${PACKAGES[@]}"; do present "$p" || out+=("$p"); done
  echo "${out[*]:-}"
}

read -r -a missing <<<"$(missing_list)"

if ((${#missing[@]})) && ((!check_only)); then
  if [ "$(id -u)" = 0 ] && have apt-get; then
    echo "system-deps: installing ${missing[*]} (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    if ! { apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }
    then
      echo "system-deps: apt-get could not install ${missing[*]}" >&2
    fi
    read -r -a missing <<<"$(missing_list)"
  fi
fi

if ((${#missing[@]})); then
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo "
  how="${sudo}apt-get update && ${sudo}apt-get install -y ${missing[*]}"
  {
    echo "system-deps: missing ${missing[*]}"
    echo "system-deps: to install them run:  $how"
    echo "system-deps: until then the tests that need them are reported as not run (skipped, with this reason)"
  } >&2
  if [ -n "${CI:-}" ] || ((check_only)); then
    [ -n "${CI:-}" ] && echo "system-deps: CI is set: every test must run, so this is an error" >&2
    exit 1
  fi
else
  echo "system-deps: all present (${PACKAGES[*]})"
fi
exit 0
