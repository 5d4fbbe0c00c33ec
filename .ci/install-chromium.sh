#!/bin/sh
# Install Debian's headless-capable Chromium for the HTML report tests, if it is absent.
# Usage: .ci/install-chromium.sh   (exit 0 when /usr/bin/chromium is usable afterwards)
set -e
if [ -x /usr/bin/chromium ]; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-chromium: no apt-get here; install Chromium yourself" >&2
    exit 1
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; else
        echo "install-chromium: not root and no sudo" >&2; exit 1; fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends chromium fonts-dejavu-core
[ -x /usr/bin/chromium ]
