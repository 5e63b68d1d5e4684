#!/usr/bin/env bash
# Makes sure a headless-capable Chromium is installed for the playground's browser test
# (internal/server/playground), installing Debian's chromium package with apt-get when
# it is not. Idempotent and quiet: prints nothing when Chromium is already there.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh"

have_chromium() {
	command -v chromium >/dev/null || command -v chromium-browser >/dev/null || command -v google-chrome >/dev/null
}

if have_chromium; then
	exit 0
fi
apt_install ensure-chromium chromium
if ! have_chromium; then
	echo "ensure-chromium: chromium installed but no chromium command on PATH" >&2
	exit 1
fi
