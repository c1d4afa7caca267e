#!/bin/sh
# `npm test` runs this first. It says what the suite needs from the system, and what it is about to
# install and why, before it installs anything, so README's two commands are all a fresh Debian
# machine needs. It installs only as root with apt-get; otherwise it says how and stops.
#   chromium  the admin page's browser tests (playwright-core drives Debian's chromium; it downloads none)
#   faketime  the clock-skew tests run engine processes with a skewed wall clock (libfaketime)
#   pgbouncer the pooler test runs engines through a PgBouncer of its own in transaction mode (its own
#             port and ini; a system pgbouncer service the package may start is not used)
# The fault suite also mounts small tmpfs disks (as root) to fill them; that installs nothing.
set -eu
CHROMIUM="${SKEIN_CHROMIUM:-/usr/bin/chromium}"
LIBFAKETIME=/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1
PGBOUNCER=/usr/sbin/pgbouncer

missing=""
[ -x "$CHROMIUM" ] || missing="$missing chromium"
[ -e "$LIBFAKETIME" ] || missing="$missing faketime"
[ -x "$PGBOUNCER" ] || missing="$missing pgbouncer"
[ -z "$missing" ] && exit 0

echo "npm test needs Debian packages that are missing:$missing" >&2
case "$missing" in *chromium*) echo "  chromium: the admin page's browser tests drive it (with its dependencies, a few hundred MB)" >&2 ;; esac
case "$missing" in *faketime*) echo "  faketime: the clock-skew tests run engines with a skewed wall clock" >&2 ;; esac
case "$missing" in *pgbouncer*) echo "  pgbouncer: the pooler test runs engines behind PgBouncer in transaction mode" >&2 ;; esac
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing them now: apt-get install -y$missing" >&2
  log="${TMPDIR:-/tmp}/skein-apt-get.log"
  # shellcheck disable=SC2086 # one word per package
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing; } >"$log" 2>&1; then
    cat "$log" >&2
    echo "apt-get install -y$missing failed (its output is above)" >&2
    exit 1
  fi
  echo "installed:$missing (apt-get's output: $log)" >&2
  [ -x "$CHROMIUM" ] && [ -e "$LIBFAKETIME" ] && [ -x "$PGBOUNCER" ] && exit 0
  echo "apt-get ran but$missing is still missing" >&2
  exit 1
fi
echo "run as root: apt-get install -y$missing (or set SKEIN_CHROMIUM to a chromium binary)" >&2
exit 1
