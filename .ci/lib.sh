# Shared by .ci/setup-runtime, .ci/setup and .ci/sample: run one named set-up step; on failure
# print one line naming the step and how to retry, and stop. Nothing is ever pip-installed
# into the system interpreter: Python packages go into the project's virtual environment.
# shellcheck shell=bash
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${ROCM_PACKAGING_VENV:-$ROOT/.venv}"
export DEBIAN_FRONTEND=noninteractive

step() {
  local what="$1"
  shift
  local log
  log="$(mktemp)"
  if ! "$@" >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    rm -f "$log"
    echo "setup failed at step: $what — fix the cause above (network, disk, apt lock) and re-run: bash ${SETUP_SCRIPT:-.ci/setup}" >&2
    exit 1
  fi
  rm -f "$log"
}

apt_install() {
  # apt_install PKG... : install the Debian packages that are missing (as root)
  local missing=()
  local pkg
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" != 0 ]; then
    echo "setup needs these Debian packages: ${missing[*]} — install them as root (apt-get install ${missing[*]}) and re-run" >&2
    exit 1
  fi
  step "apt-get update" apt-get update -qq
  step "apt-get install ${missing[*]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

make_venv() {
  # The project's virtual environment, made from whatever python3 is first on PATH. A half-made
  # one (a failed earlier run) is removed and made again.
  local python="${PYTHON:-python3}"
  command -v "$python" >/dev/null || { echo "setup needs python3 >= 3.10 on PATH" >&2; exit 1; }
  "$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
    || { echo "setup needs python3 >= 3.10; $python is $("$python" --version 2>&1)" >&2; exit 1; }
  if [ ! -x "$VENV/bin/python" ] || [ ! -f "$VENV/.complete" ]; then
    rm -rf "$VENV"
    step "python3 -m venv $VENV" "$python" -m venv "$VENV"
  fi
}

venv_pip_install() {
  # venv_pip_install SPEC... ; marks the venv complete only when pip succeeded
  rm -f "$VENV/.complete"
  step "pip install $*" "$VENV/bin/python" -m pip install -q --disable-pip-version-check "$@"
  touch "$VENV/.complete"
}
