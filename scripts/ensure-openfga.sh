#!/usr/bin/env bash
# Makes sure bin/openfga is OpenFGA at the version pinned here, for the tests that compare
# latch with the real OpenFGA (internal/server/openfga/fgatest: its conformance suite run
# against OpenFGA, the differential test, the OpenFGA side of the benchmarks), building it
# with `go install` from the Go module proxy when it is missing or another version; a
# binary of that version already in Go's bin directory is copied instead. Idempotent and
# quiet: prints nothing when the right OpenFGA is already there.
set -euo pipefail

OPENFGA_VERSION=v1.22.1 # keep in step with fgatest.OpenFGAVersion

bin="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/bin"
is_pinned() {
	[ -x "$1" ] && go version -m "$1" 2>/dev/null | grep -q "mod[[:space:]]*github.com/openfga/openfga[[:space:]]*$OPENFGA_VERSION[[:space:]]"
}
if is_pinned "$bin/openfga"; then
	exit 0
fi
mkdir -p "$bin"
gobin="$(go env GOBIN)"
[ -n "$gobin" ] || gobin="$(go env GOPATH)/bin"
if is_pinned "$gobin/openfga"; then
	cp "$gobin/openfga" "$bin/openfga"
	exit 0
fi
echo "ensure-openfga: building OpenFGA $OPENFGA_VERSION into $bin (about five minutes the first time)" >&2
GOBIN="$bin" GOFLAGS=-mod=mod CGO_ENABLED=0 go install "github.com/openfga/openfga/cmd/openfga@$OPENFGA_VERSION"
