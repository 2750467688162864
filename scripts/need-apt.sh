#!/usr/bin/env bash
# need-apt.sh COMMAND PACKAGE...: makes sure COMMAND is on PATH, installing
# the Debian PACKAGEs with apt-get when it is missing and apt-get can (root).
# Exits non-zero with a sentence saying why when it cannot; the callers turn
# that into an error (make wheel) or a skip with the reason (the tests).
set -uo pipefail
cmd=$1; shift
command -v "$cmd" >/dev/null && exit 0
if ! command -v apt-get >/dev/null; then
  echo "$cmd is not installed and apt-get is not available: install $* by hand" >&2; exit 1
fi
if [ "$(id -u)" != 0 ]; then
  echo "$cmd is not installed: run as root, or apt-get install $*" >&2; exit 1
fi
echo "== apt-get install $*" >&2
if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"; } >/dev/null 2>&1; then
  echo "$cmd is not installed and apt-get install $* failed" >&2; exit 1
fi
command -v "$cmd" >/dev/null || { echo "apt-get installed $* but $cmd is still not on PATH" >&2; exit 1; }
