#!/bin/sh
# The admin page's browser tests drive Debian's chromium (playwright-core downloads no browser).
# `npm test` runs this first: it installs chromium when it is missing and this user may (root,
# with apt-get), so that README's two commands are all a fresh machine needs; otherwise it says how.
set -eu
CHROMIUM="${SKEIN_CHROMIUM:-/usr/bin/chromium}"
[ -x "$CHROMIUM" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian's chromium for the browser tests (apt-get install chromium)" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
  [ -x "$CHROMIUM" ] && exit 0
fi
echo "the browser tests need chromium at $CHROMIUM: run apt-get install -y chromium as root, or set SKEIN_CHROMIUM" >&2
exit 1
