#!/usr/bin/env bash
# py-spy 0.4.3, the sampler `headroom profiler` runs beside a Python server
# (docs/PROFILES.md, "Python and native servers"): from PyPI (a binary
# wheel), pinned, in a venv of its own.
#
#   ./scripts/py-spy.sh install   # ~5 s the first time; instant after
#   ./scripts/py-spy.sh path      # prints the py-spy program, for --py-spy
#
#   headroom profiler --pid PID --py-spy "$(./scripts/py-spy.sh path)"
#
# Environment:
#   HEADROOM_CACHE   where the venv lives ($HOME/.cache/headroom by default)
#   PYTHON (python3) the Python that makes the venv
#
# Exit codes: 0 done, 1 failed (the message says why), 2 usage, 3 `path`
# before `install`.
set -euo pipefail
source "$(dirname "$0")/install.sh"

VERSION=0.4.3
VENV=${HEADROOM_CACHE:-$HOME/.cache/headroom}/py-spy-$VERSION
PYSPY=$VENV/bin/py-spy

die() {
	echo "py-spy.sh: $*" >&2
	exit 1
}

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
}

installed() { [[ -x $PYSPY ]] && "$PYSPY" --version 2>/dev/null | grep -qx "py-spy $VERSION"; }

install() {
	if installed; then
		echo "py-spy $VERSION: installed in $VENV"
		return 0
	fi
	local python=${PYTHON:-python3}
	command -v "$python" >/dev/null || die "install: $python not found; install Python 3 (or set PYTHON=/path/to/python3)"
	echo "py-spy $VERSION: installing into $VENV"
	rm -rf "$VENV" # a half-made venv is made again
	mkdir -p "$(dirname "$VENV")"
	"$python" -m venv "$VENV" || die "install: could not make a venv with $python (on Debian: apt-get install python3-venv)"
	retry "$VENV/bin/pip" install --quiet --disable-pip-version-check --require-virtualenv "py-spy==$VERSION" ||
		die "install: pip failed (above); the next install starts over"
	installed || die "install: $PYSPY is not py-spy $VERSION"
	echo "py-spy $VERSION: installed in $VENV"
}

case ${1:-} in
install) install ;;
path)
	installed || { echo "py-spy.sh: py-spy $VERSION is not installed: run ./scripts/py-spy.sh install" >&2; exit 3; }
	echo "$PYSPY"
	;;
*) usage ;;
esac
