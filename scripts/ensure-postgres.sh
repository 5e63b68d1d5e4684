#!/usr/bin/env bash
# Makes sure the PostgreSQL server binaries the store tests need (initdb, pg_ctl under
# /usr/lib/postgresql/*/bin) are installed, installing Debian's postgresql package
# with apt-get when they are not. Idempotent and quiet: prints nothing when PostgreSQL
# is already there. The tests start their own throwaway server; the service the
# package installs is not started here.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh"

have_postgres() {
	compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null
}

if have_postgres; then
	exit 0
fi
apt_install ensure-postgres postgresql
if ! have_postgres; then
	echo "ensure-postgres: postgresql installed but no initdb under /usr/lib/postgresql/*/bin" >&2
	exit 1
fi
