#!/usr/bin/env bash
# Makes sure bin/helm is Helm at the version pinned here, for the Helm chart's tests
# (internal/cli, deploy/helm/latch), building it with `go install` from the Go module
# proxy when it is missing or another version. Idempotent and quiet: prints nothing
# when the right Helm is already there.
set -euo pipefail

HELM_VERSION=v3.22.0

bin="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/bin"
if [ -x "$bin/helm" ] && go version -m "$bin/helm" 2>/dev/null | grep -q "mod[[:space:]]*helm.sh/helm/v3[[:space:]]*$HELM_VERSION[[:space:]]"; then
	exit 0
fi
echo "ensure-helm: building Helm $HELM_VERSION into $bin (a few minutes the first time)" >&2
GOBIN="$bin" GOFLAGS=-mod=mod CGO_ENABLED=0 go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
