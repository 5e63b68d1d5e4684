# latch's developer commands. `make test` is the whole test suite and exactly what CI
# runs (.ci/run); fuzzing and linting are separate because they take longer or need
# tools downloaded.

GO       ?= go
FUZZTIME ?= 10s
TOOL     := $(GO) tool -modfile=tools/go.mod

.PHONY: all build test vet unit postgres chromium helm openfga fga-compare fuzz reliability lint fmt clean

all: build

## build: compile the latch binary into bin/latch (with its commit, for latch version, when built from a git checkout).
build:
	$(GO) build -buildvcs=auto -o bin/latch ./cmd/latch

## test: vet, then every test with the race detector (installs PostgreSQL, Chromium and Helm if missing).
test: postgres chromium helm vet unit

vet:
	$(GO) vet ./...

unit:
	$(GO) test -race -count=1 ./...

# The store tests start a throwaway PostgreSQL server; this installs the binaries
# (Debian's postgresql package) when they are missing, and prints nothing otherwise.
postgres:
	@scripts/ensure-postgres.sh

# The playground's browser test drives a headless Chromium; this installs Debian's
# chromium package when it is missing, and prints nothing otherwise.
chromium:
	@scripts/ensure-chromium.sh

# The Helm chart's tests (internal/cli) render deploy/helm/latch with the real helm;
# this builds the pinned Helm into bin/helm when it is missing, and prints nothing otherwise.
helm:
	@scripts/ensure-helm.sh

# The comparisons with the real OpenFGA (internal/server/openfga/fgatest) need its binary;
# this builds the pinned OpenFGA into bin/openfga when it is missing (about five minutes
# from a cold module cache, which is why `make test` does not: those tests skip there).
openfga:
	@scripts/ensure-openfga.sh

## fga-compare: OpenFGA's conformance suite, the differential test and the SDK runs against the real OpenFGA and latch.
fga-compare: openfga
	$(GO) test -race -count=1 ./internal/server/openfga/fgatest

## fuzz: run every fuzz target for FUZZTIME (default 10s) each.
fuzz:
	@set -e; for file in $$(grep -rl --include='*_test.go' '^func Fuzz' cmd internal); do \
		dir=./$$(dirname $$file); \
		for target in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$file); do \
			echo "== $$dir $$target"; \
			$(GO) test -run='^$$' -fuzz="^$$target$$" -fuzztime=$(FUZZTIME) $$dir; \
		done; \
	done

## reliability: the table of durability, outage, overload, cluster-fault and fuzzing figures
## (FUZZTIME per fuzz target, default 10s); not part of `make test`, CI runs it as its own step.
reliability: postgres
	@FUZZTIME=$(FUZZTIME) scripts/reliability.sh

## lint: staticcheck and gofumpt, at the versions pinned in tools/go.mod.
lint:
	$(TOOL) staticcheck ./...
	@out=$$($(TOOL) gofumpt -l cmd internal); if [ -n "$$out" ]; then echo "not gofumpt-formatted:"; echo "$$out"; exit 1; fi

## fmt: format the code with gofumpt.
fmt:
	$(TOOL) gofumpt -w cmd internal

clean:
	rm -rf bin
