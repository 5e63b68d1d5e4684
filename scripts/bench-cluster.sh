#!/usr/bin/env bash
# Measures latch as a cluster on this machine (issue "Cluster mode"): the social
# workload through 3 nodes over one throwaway PostgreSQL, with ring routing and with
# the same 3 nodes each alone, and 1 node against 3 for the cost of a hop. Each
# configuration first takes the same load, RATE checks/s for SECONDS after a warm-up,
# so that its caches see the same checks: one line with the cluster-wide cache hit
# ratio, datastore queries per check, server CPU per check (all nodes' CPU over all
# checks) and p95 and p99 at that load. Then 16 checks in flight for 20 s: the most it
# serves, and the CPU per check when busy. Last, the cluster with node 3 made slow (its
# dispatch service holds every dispatch 200 ms), loaded through nodes 1 and 2 beside
# the healthy cluster loaded the same way: hedging keeps their p99 near the healthy one.
#
#   scripts/bench-cluster.sh [USERS] [SECONDS] [CACHE] [RATE]  (defaults 20000 60 8MiB 1000)
#
# Needs Debian's PostgreSQL (scripts/ensure-postgres.sh installs it). Everything binds
# 127.0.0.1 and is removed at the end.
set -euo pipefail
users=${1:-20000}
secs=${2:-60}
cache=${3:-8MiB}
rate=${4:-1000}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/latch-bench-cluster.XXXXXX)
chmod 755 "$work"
pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  runuser -u postgres -- "$pgbin/pg_ctl" -D "$work/pg" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/latch" "$root/cmd/latch"
latch=$work/latch
key=bench-key
pgport=$((20000 + RANDOM % 20000))
mkdir "$work/pg"
chown postgres "$work/pg"
runuser -u postgres -- "$pgbin/initdb" -D "$work/pg" -U latch -A trust -E UTF8 --locale=C --no-sync >/dev/null
runuser -u postgres -- "$pgbin/pg_ctl" -D "$work/pg" -l "$work/pg/server.log" -w -o \
  "-c listen_addresses=127.0.0.1 -p $pgport -c unix_socket_directories=$work/pg -c fsync=off -c synchronous_commit=off -c max_connections=300 -c shared_buffers=256MB" start >/dev/null
uri="postgres://latch@127.0.0.1:$pgport/postgres?sslmode=disable"
"$latch" datastore migrate --datastore-engine postgres --datastore-conn-uri "$uri" >/dev/null

# start_node I EXTRA... starts node I (gRPC 127.0.0.1:5105I, metrics 919I, dispatch 5205I).
start_node() {
  local i=$1
  shift
  "$latch" serve --datastore-engine postgres --datastore-conn-uri "$uri" --grpc-preshared-key "$key" \
    --grpc-addr "127.0.0.1:5105$i" --http-addr - --metrics-addr "127.0.0.1:919$i" \
    --dispatch-cache-max-bytes "$cache" "$@" >"$work/node$i.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:919$i/metrics" >/dev/null && return 0
    sleep 0.1
  done
  echo "node $i did not start:" >&2
  cat "$work/node$i.log" >&2
  exit 1
}
stop_nodes() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait "${pids[@]}" 2>/dev/null || true
  pids=()
}
# scrape N: the sum over nodes 1..N of the series the report needs, one "name value" per line.
scrape() {
  local n=$1
  for i in $(seq "$n"); do curl -s "http://127.0.0.1:919$i/metrics"; done | awk '
    /^latch_dispatch_cache_hits_total / {h+=$2}
    /^latch_dispatch_cache_misses_total / {m+=$2}
    /^latch_datastore_query_duration_seconds_count / {q+=$2}
    /^process_cpu_seconds_total / {c+=$2}
    /^latch_cluster_dispatch_sent_total/ {s+=$2}
    /^latch_cluster_hedges_total / {g+=$2}
    END {printf "hits %d\nmisses %d\nqueries %d\ncpu %f\nsent %d\nhedges %d\n", h, m, q, c, s, g}'
}
# measure LABEL N [E]: runs the workload through nodes 1..E (default N) of the N
# running and prints the report line.
measure() {
  local label=$1 n=$2 eps=""
  for i in $(seq "${3:-$n}"); do eps="$eps,127.0.0.1:5105$i"; done
  eps=${eps#,}
  # social.yaml's steps with one phase of our own: NAME DURATION LOAD
  workload() { sed '/^phases:/,$d' "$root/workloads/social.yaml"; printf 'phases:\n  - name: %s\n    duration: %s\n    %s\n' "$@"; }
  run() { "$latch" bench run "$1" --endpoint "$eps" --token "$key" --users "$users" --conns $((2 * n)) -q "${@:2}" >/dev/null; }
  workload warm-up 10s "open: {rate: $rate, max_in_flight: 64}" >"$work/warm.yaml"
  workload steady "${secs}s" "open: {rate: $rate, max_in_flight: 64}" >"$work/steady.yaml"
  workload most 20s "closed: {in_flight: 16}" >"$work/most.yaml"
  run "$work/warm.yaml"
  scrape "$n" >"$work/before"
  run "$work/steady.yaml" -o "$work/steady.json"
  scrape "$n" >"$work/after"
  run "$work/most.yaml" -o "$work/most.json"
  scrape "$n" >"$work/end"
  python3 - "$label" "$work/before" "$work/after" "$work/end" "$work/steady.json" "$work/most.json" <<'EOF'
import json, sys
label, before, after, end, steady, most = sys.argv[1:]
def load(p):
    return {k: float(v) for k, v in (l.split() for l in open(p))}
def phase(p):
    return json.load(open(p))["phases"][-1]
b, a = load(before), load(after)
e = load(end)
d = {k: a[k] - b[k] for k in a}
s, m = phase(steady), phase(most)
most_checks = m["total"]["count"]
checks = s["total"]["count"]
looked = d["hits"] + d["misses"]
print(f"{label:22s} at {checks/s['duration_s']:5.0f}/s: cache hit {d['hits']/looked if looked else 0:6.1%}  queries/check {d['queries']/checks:5.2f}  "
      f"CPU/check {1e6*d['cpu']/checks:6.1f} us  p95 {s['total']['latency_ms']['p95']:6.2f} ms  p99 {s['total']['latency_ms']['p99']:6.2f} ms  dispatches/check {d['sent']/checks:4.2f}  hedges/check {d['hedges']/checks:4.2f}"
      f"  | 16 in flight: {most_checks/m['duration_s']:6.0f} checks/s, p95 {m['total']['latency_ms']['p95']:6.2f} ms, CPU/check {1e6*(e['cpu']-a['cpu'])/most_checks:6.1f} us")
EOF
}

members="static:///127.0.0.1:52051,127.0.0.1:52052,127.0.0.1:52053"
cluster_flags() { echo --dispatch-cluster-enabled --dispatch-cluster-addr "127.0.0.1:5205$1" --dispatch-upstream-addr "$members"; }

start_node 1
"$latch" bench gen social --users "$users" --seed 1 --endpoint 127.0.0.1:51051 --token "$key" >/dev/null
echo "social data set, $users users, in PostgreSQL; $rate checks/s for $secs s, ${cache} cache per node"
measure "1 node" 1
stop_nodes

for i in 1 2 3; do start_node "$i"; done
measure "3 nodes, each alone" 3
stop_nodes

for i in 1 2 3; do start_node "$i" $(cluster_flags "$i"); done
measure "3 nodes, ring routing" 3
stop_nodes

for i in 1 2 3; do start_node "$i" $(cluster_flags "$i"); done
measure "ring, through 1-2" 3 2
stop_nodes

for i in 1 2; do start_node "$i" $(cluster_flags "$i"); done
start_node 3 $(cluster_flags 3) --dispatch-cluster-test-delay 200ms
measure "ring, node 3 slow" 3 2
stop_nodes
