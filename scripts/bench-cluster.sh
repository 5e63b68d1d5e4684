#!/usr/bin/env bash
# Measures latch as a cluster on this machine (issue "Cluster mode"): the social
# workload through 3 nodes over one throwaway PostgreSQL, with ring routing and with
# the same 3 nodes each alone, and 1 node against 3 for the cost of a hop. Prints one
# line per configuration: checks/s, p95, cluster-wide cache hit ratio, datastore
# queries per check and server CPU per check (all nodes' CPU over all checks).
#
#   scripts/bench-cluster.sh [USERS] [SECONDS] [CACHE]     (defaults 20000 30 8MiB)
#
# Needs Debian's PostgreSQL (scripts/ensure-postgres.sh installs it). Everything binds
# 127.0.0.1 and is removed at the end.
set -euo pipefail
users=${1:-20000}
secs=${2:-30}
cache=${3:-8MiB}
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
# measure LABEL N: runs the workload over nodes 1..N and prints the report line.
measure() {
  local label=$1 n=$2 eps=""
  for i in $(seq "$n"); do eps="$eps,127.0.0.1:5105$i"; done
  eps=${eps#,}
  # a short warm-up, then the measured run: social.yaml's steps with phases of our own
  workload() { sed '/^phases:/,$d' "$root/workloads/social.yaml"; printf 'phases:\n  - name: %s\n    duration: %s\n    closed: {in_flight: 16}\n' "$1" "$2"; }
  workload warm-up 5s >"$work/warm.yaml"
  workload steady "${secs}s" >"$work/run.yaml"
  "$latch" bench run "$work/warm.yaml" --endpoint "$eps" --token "$key" --users "$users" --conns $((2 * n)) -q >/dev/null
  scrape "$n" >"$work/before"
  "$latch" bench run "$work/run.yaml" --endpoint "$eps" --token "$key" --users "$users" --conns $((2 * n)) -q -o "$work/$label.json" >/dev/null
  scrape "$n" >"$work/after"
  python3 - "$label" "$work/before" "$work/after" "$work/$label.json" <<'EOF'
import json, sys
label, before, after, result = sys.argv[1:]
def load(p):
    return {k: float(v) for k, v in (l.split() for l in open(p))}
b, a = load(before), load(after)
d = {k: a[k] - b[k] for k in a}
res = json.load(open(result))
phase = res["phases"][-1]
checks = phase["total"]["count"]
secs = phase["duration_s"]
p95 = phase["total"]["latency_ms"]["p95"]
looked = d["hits"] + d["misses"]
print(f"{label:28s} checks/s {checks/secs:8.0f}  p95 {p95:6.2f} ms  cache hit {d['hits']/looked if looked else 0:6.1%}  "
      f"queries/check {d['queries']/checks:5.2f}  CPU/check {1e6*d['cpu']/checks:6.1f} us  dispatches/check {d['sent']/checks:4.2f}  hedges/check {d['hedges']/checks:4.2f}")
EOF
}

members="static:///127.0.0.1:52051,127.0.0.1:52052,127.0.0.1:52053"
cluster_flags() { echo --dispatch-cluster-enabled --dispatch-cluster-addr "127.0.0.1:5205$1" --dispatch-upstream-addr "$members"; }

start_node 1
"$latch" bench gen social --users "$users" --seed 1 --endpoint 127.0.0.1:51051 --token "$key" >/dev/null
echo "social data set, $users users, in PostgreSQL; $secs s per run, ${cache} cache per node"
measure "1 node" 1
stop_nodes

for i in 1 2 3; do start_node "$i"; done
measure "3 nodes, each alone" 3
stop_nodes

for i in 1 2 3; do start_node "$i" $(cluster_flags "$i"); done
measure "3 nodes, ring routing" 3
stop_nodes
