#!/usr/bin/env bash
# `make reliability`: the figures an operator asks about, gathered into one table.
# Runs the durability, outage, tenant, overload and cluster-fault tests verbosely
# (LATCH_RELIABILITY=1 turns on the overload figures, which the test suite skips),
# then every fuzz target for FUZZTIME each, and prints each test's "reliability:" line
# and each fuzz target's executions. Any failure fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-10s}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
export LATCH_RELIABILITY=1

run() { # PACKAGE REGEXP
  if ! go test -count=1 -v -run "$2" "$1" >"$log" 2>&1; then
    grep -E -- '--- FAIL|FAIL|panic|_test.go' "$log" | head -40 >&2
    echo "reliability: $1 $2 failed" >&2
    exit 1
  fi
  grep -o 'reliability: .*' "$log" | sed 's/^reliability: /| /; s/: /: | /; s/$/ |/'
}

echo "| figure | result |"
echo "|---|---|"
run ./internal/store/pebble '^TestCrashRecovery$'
run ./internal/store/postgres '^TestRestartUnderLoad$'
run ./internal/server '^(TestPostgresOutageUnderLoad|TestPermifyTenantsSurviveRestarts|TestReliabilityOverload|TestClusterProcessKill)$'
# A restarted node is taken back within 10 s; a healthy cluster under check load for
# LATCH_FLAP_SECONDS (60: the issue's 5 minutes do not fit CI's 900 s step) marks no
# peer down.
run ./internal/server '^(TestClusterProcessRestart|TestClusterProcessNoFlapping)$'
run ./internal/server '^(TestReliabilityStalledClient|TestReliabilityPlaygroundFlood|TestReliabilityWatchStreamsPostgres)$'

fuzz() { # DIR TARGET
  go test -run='^$' -fuzz="^$2\$" -fuzztime="$fuzztime" "$1" >"$log" 2>&1
}
fuzz_failed() { # DIR TARGET
  cat "$log" >&2
  echo "reliability: fuzzing $1 $2 failed" >&2
  exit 1
}

for file in $(grep -rl --include='*_test.go' '^func Fuzz' cmd internal | sort); do
  dir=./$(dirname "$file")
  for target in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$file"); do
    if ! fuzz "$dir" "$target"; then
      # Go 1.26's fuzz coordinator can report "context deadline exceeded" when
      # -fuzztime ends while a starved worker is mid-call (go.dev/issue/75804).
      # That bare report, with no failing input written, earns one retry; a
      # finding, a panic or a second failure fails the run.
      if grep -q 'context deadline exceeded' "$log" && ! grep -qE 'Failing input written|panic:|_test.go:[0-9]+' "$log"; then
        echo "reliability: $dir $target hit the fuzztime deadline race; retrying once" >&2
        fuzz "$dir" "$target" || fuzz_failed "$dir" "$target"
      else
        fuzz_failed "$dir" "$target"
      fi
    fi
    execs=$(grep -o 'execs: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
    echo "| fuzz $dir $target: | ${execs:-?} executions in $fuzztime, no failure |"
  done
done
