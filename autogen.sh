#!/bin/sh
# Generates configure and Makefile.in from configure.ac and Makefile.am.
set -e
cd "$(dirname "$0")"
autoreconf --install --force >/dev/null 2>&1 || autoreconf --install --force
# the TAP driver counts each test case of the cmocka and shell tests
cp "$(automake --print-libdir)/tap-driver.sh" build-aux/tap-driver.sh
