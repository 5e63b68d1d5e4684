#!/usr/bin/env bash
# Makes sure the PostgreSQL server binaries the store tests need (initdb, pg_ctl under
# /usr/lib/postgresql/*/bin) are installed, installing Debian's postgresql package
# with apt-get when they are not. Idempotent and quiet: prints nothing when PostgreSQL
# is already there. The tests start their own throwaway server; the service the
# package installs is not started here.
set -euo pipefail

have_postgres() {
	compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null
}

if have_postgres; then
	exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
	if ! command -v sudo >/dev/null; then
		echo "ensure-postgres: PostgreSQL is not installed and this is not root; install the postgresql package" >&2
		exit 1
	fi
	sudo="sudo"
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
export DEBIAN_FRONTEND=noninteractive
if ! { $sudo apt-get update -qq && $sudo apt-get install -y -qq --no-install-recommends postgresql; } >"$log" 2>&1; then
	echo "ensure-postgres: installing postgresql failed:" >&2
	cat "$log" >&2
	exit 1
fi

if ! have_postgres; then
	echo "ensure-postgres: postgresql installed but no initdb under /usr/lib/postgresql/*/bin" >&2
	exit 1
fi
