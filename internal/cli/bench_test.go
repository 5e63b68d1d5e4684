package cli

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/latch-authz/latch/internal/bench"
	"github.com/latch-authz/latch/internal/rel"
)

// e2eWorkload has every step type and both load models, and lasts under 3 s.
const e2eWorkload = `name: e2e
users: 300
dataset: {name: social, seed: 2}
generators:
  subject: {dist: zipf, s: 1.1, seed: 42}
  active: {dist: pareto}
  dau: {dist: dau, factor: 0.1}
  user: {dist: uniform}
  content: {dist: uniform}
steps:
  - {name: check-content, type: check, weight: 40, resource: "content:c{content}", permission: view, subject: "user:u{subject}"}
  - {name: check-dau, type: check, weight: 10, resource: "user:u{user}", permission: view, subject: "user:u{dau}", consistency: fully_consistent}
  - {name: check-bulk, type: check-bulk, weight: 5, items: 5, resource: "content:c{content}", permission: view, subject: "user:u{subject}"}
  - {name: lookup-resources, type: lookup-resources, weight: 3, resource: content, permission: view, subject: "user:u{subject}"}
  - {name: lookup-subjects, type: lookup-subjects, weight: 3, resource: "user:u{user}", permission: view, subject: user}
  - {name: read, type: read, weight: 5, resource: "user:u{user}", relation: follower, limit: 50}
  - {name: follow, type: write, weight: 5, resource: "user:u{user}", relation: follower, subject: "user:u{active}"}
  - {name: unfollow, type: delete, weight: 3, resource: "user:u{user}", relation: follower, subject: "user:u{active}"}
  - {name: check-fresh, type: check, weight: 5, resource: "user:u{user}", permission: view, subject: "user:u{active}", consistency: at_least_as_fresh}
phases:
  - {name: warm-up, warmup: true, duration: 300ms, closed: {in_flight: 4}}
  - {name: closed, duration: 1200ms, closed: {in_flight: 8}}
  - {name: open, open: {start_rate: 100, stages: [{target: 300, duration: 1s}], max_in_flight: 16}}
`

func TestBenchRunInProcessEndToEnd(t *testing.T) {
	dir := t.TempDir()
	wl, jsonPath, htmlPath := filepath.Join(dir, "w.yaml"), filepath.Join(dir, "r.json"), filepath.Join(dir, "r.html")
	if err := os.WriteFile(wl, []byte(e2eWorkload), 0o600); err != nil {
		t.Fatal(err)
	}
	r := latch(t, "bench", "run", wl, "--in-process", "-o", jsonPath, "--html", htmlPath)
	if r.code != 0 {
		t.Fatalf("bench run exited %d:\n%s", r.code, r.err)
	}
	if !strings.Contains(r.err, "relationships/s") || !strings.Contains(r.out, "phase closed") {
		t.Errorf("want a load figure on stderr and a summary on stdout; stderr:\n%s\nstdout:\n%s", r.err, r.out)
	}
	res, err := bench.ReadResult(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, res)
	checkHTML(t, htmlPath, res)

	r = latch(t, "bench", "compare", jsonPath, jsonPath)
	if r.code != 0 || !strings.Contains(r.out, "1.00x") {
		t.Errorf("compare of a result with itself: exit %d, out:\n%s%s", r.code, r.out, r.err)
	}
	again := filepath.Join(dir, "again.html")
	if r = latch(t, "bench", "report", jsonPath, "-o", again); r.code != 0 {
		t.Errorf("bench report: %s", r.err)
	}
}

func checkResult(t *testing.T, res *bench.Result) {
	t.Helper()
	if res.Users != 300 || len(res.Phases) != 2 || res.Phases[0].Name != "closed" || res.Phases[1].Name != "open" {
		t.Fatalf("result has users %d and %d phases %v; want 300 and the two measured phases (warm-up excluded)", res.Users, len(res.Phases), res.Phases)
	}
	closed, open := res.Phases[0], res.Phases[1]
	for _, s := range closed.Steps {
		if s.Count+errorCount(s) == 0 {
			t.Errorf("step %s ran no request in the closed phase", s.Name)
		}
	}
	for _, p := range res.Phases {
		for _, s := range p.Steps {
			// The server may not serve lookups yet; then they must show as Unimplemented,
			// counted by code. Every other step must succeed.
			lookup := strings.HasPrefix(s.Type, "lookup-")
			if len(s.Errors) > 0 && !(lookup && len(s.Errors) == 1 && s.Errors["Unimplemented"] > 0) {
				t.Errorf("phase %s step %s: errors %v", p.Name, s.Name, s.Errors)
			}
			if !lookup && s.Count == 0 && p.Name == "closed" {
				t.Errorf("step %s: no successful request in the closed phase", s.Name)
			}
			l := s.Latency
			if s.Count > 0 && !(0 < l.P50 && l.P50 <= l.P90 && l.P90 <= l.P95 && l.P95 <= l.P99 && l.P99 <= l.P999 && l.P999 <= l.Max) {
				t.Errorf("phase %s step %s: percentiles out of order: %+v", p.Name, s.Name, l)
			}
		}
		if len(p.Series) == 0 || p.Total.Rate <= 0 || len(p.Total.Histogram) == 0 {
			t.Errorf("phase %s: %d series points, rate %g, %d buckets", p.Name, len(p.Series), p.Total.Rate, len(p.Total.Histogram))
		}
	}
	// 100→300/s over 1 s is 200 arrivals, every one started or dropped.
	if open.Scheduled != 200 || open.Total.Count+open.Dropped+errorCount(open.Total) != 200 {
		t.Errorf("open phase: scheduled %d, answered %d, dropped %d; want 200 in all", open.Scheduled, open.Total.Count, open.Dropped)
	}
	if closed.GeneratorCPU.Cores <= 0 {
		t.Errorf("generator CPU %+v", closed.GeneratorCPU)
	}
}

func errorCount(s bench.StepResult) int64 {
	var n int64
	for _, c := range s.Errors {
		n += c
	}
	return n
}

func checkHTML(t *testing.T, path string, res *bench.Result) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	for _, want := range []string{"<!DOCTYPE html>", "<svg", "<polyline", "Latency percentiles over time", "Throughput over time", "Latency histogram", "Phase closed", "Phase open", "check-bulk", "lookup-subjects"} {
		if !strings.Contains(page, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	for _, banned := range []string{"http://", "https://", "<script", "<link", "<img"} {
		if strings.Contains(strings.ReplaceAll(page, `xmlns="http://www.w3.org/2000/svg"`, ""), banned) {
			t.Errorf("the report holds %q: it must be self-contained", banned)
		}
	}
	if strings.Count(page, "<svg") != 3*len(res.Phases) {
		t.Errorf("the report has %d charts, want 3 per phase", strings.Count(page, "<svg"))
	}
}

func TestBenchGenToFileIsDeterministic(t *testing.T) {
	dir := t.TempDir()
	gen := func(name, seed string) []byte {
		path := filepath.Join(dir, name)
		if r := latch(t, "bench", "gen", "social", "--users", "300", "--seed", seed, "-o", path); r.code != 0 {
			t.Fatalf("bench gen: %s", r.err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, b, c := gen("a", "3"), gen("b", "3"), gen("c", "4")
	if !bytes.Equal(a, b) {
		t.Error("the same seed wrote different files")
	}
	if bytes.Equal(a, c) {
		t.Error("different seeds wrote the same file")
	}
	lines := strings.Split(strings.TrimSpace(string(a)), "\n")
	if len(lines) < 3000 {
		t.Errorf("%d relationships for 300 users, want about 4,000", len(lines))
	}
	for _, l := range lines {
		if _, err := rel.Parse(l); err != nil {
			t.Fatalf("line %q does not parse: %v", l, err)
		}
	}
}

func TestBenchGenIntoServer(t *testing.T) {
	const key = "bench-key"
	addr := startServer(t, key)
	r := latch(t, "bench", "gen", "permify", "--users", "100", "--endpoint", addr, "--token", key)
	if r.code != 0 || !strings.Contains(r.err, "650 relationships") || !strings.Contains(r.err, "relationships/s") {
		t.Fatalf("bench gen permify: exit %d\n%s", r.code, r.err)
	}
	for check, want := range map[string]string{
		"content:0#view@user:0":     "true", // owner
		"content:4#view@user:55":    "true", // public (4 % 4 == 0)
		"content:5#view@user:6":     "true", // the owner's follower
		"content:5#view@user:55":    "false",
		"interaction:5#view@user:5": "true",
	} {
		if r := latch(t, "check", check, "--endpoint", addr, "--token", key); strings.TrimSpace(r.out) != want {
			t.Errorf("check %s: %q %s, want %s", check, r.out, r.err, want)
		}
	}
}

func TestBenchRunErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(strings.Replace(e2eWorkload, "type: read", "type: scan", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := latch(t, "bench", "run", bad, "--in-process"); r.code != 1 || !strings.Contains(r.err, "bad.yaml: line 16: step \"read\": type \"scan\"") {
		t.Errorf("bad workload: exit %d, stderr %q", r.code, r.err)
	}
	if r := latch(t, "bench", "run", bad, "--target", "mars"); r.code != 1 {
		t.Errorf("unknown target accepted: %q", r.err)
	}
	if r := latch(t, "bench", "gen", "twitter", "-o", filepath.Join(dir, "x")); r.code != 1 || !strings.Contains(r.err, `unknown data set "twitter"`) {
		t.Errorf("unknown data set: exit %d, stderr %q", r.code, r.err)
	}
	if r := latch(t, "bench", "compare", bad, bad); r.code != 1 || !strings.Contains(r.err, "not a latch bench result") {
		t.Errorf("compare of a non-result: exit %d, stderr %q", r.code, r.err)
	}
}

// TestBenchRunFailsFastWithoutServer: a run against an address where no server listens,
// or with a token the server refuses, fails before its phases with the reason and what
// to do, instead of counting every call of the run as an error.
func TestBenchRunFailsFastWithoutServer(t *testing.T) {
	dir := t.TempDir()
	wl := filepath.Join(dir, "w.yaml")
	if err := os.WriteFile(wl, []byte(clusterWorkload), 0o600); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nobody := lis.Addr().String()
	lis.Close()
	r := latch(t, "bench", "run", wl, "-q", "--endpoint", nobody, "--token", "k")
	if r.code != 1 || !strings.Contains(r.err, "is a latch server running at "+nobody) || strings.Contains(r.out, "phase") {
		t.Errorf("run against %s where nothing listens: exit %d, stdout %q, stderr %q", nobody, r.code, r.out, r.err)
	}
	addr := startServer(t, "right-key")
	r = latch(t, "bench", "run", wl, "-q", "--endpoint", addr, "--token", "wrong-key")
	if r.code != 1 || !strings.Contains(r.err, "invalid preshared key") || !strings.Contains(r.err, "--token") || strings.Contains(r.out, "phase") {
		t.Errorf("run with a wrong token: exit %d, stdout %q, stderr %q", r.code, r.out, r.err)
	}
	// A server without a schema answers: the run goes on (and its checks fail).
	if r := latch(t, "bench", "run", wl, "-q", "--endpoint", addr, "--token", "right-key"); r.code != 0 || !strings.Contains(r.out, "phase steady") {
		t.Errorf("run against a server without a schema: exit %d, stdout %q, stderr %q", r.code, r.out, r.err)
	}
}

// TestBenchRunAgainstEmptyServer runs the empty server in a process of its own (this
// test binary, as TestMain lets it) and reports that process's CPU beside the rate.
func TestBenchRunAgainstEmptyServer(t *testing.T) {
	dir := t.TempDir()
	wl, out := filepath.Join(dir, "w.yaml"), filepath.Join(dir, "r.json")
	if err := os.WriteFile(wl, []byte(clusterWorkload), 0o600); err != nil {
		t.Fatal(err)
	}
	r := latch(t, "bench", "run", wl, "--target", "empty", "-q", "-o", out)
	if r.code != 0 {
		t.Fatalf("bench run --target empty: exit %d, stderr:\n%s", r.code, r.err)
	}
	res, err := bench.ReadResult(out)
	if err != nil {
		t.Fatal(err)
	}
	p := res.Phases[0]
	if p.Total.Count == 0 || p.Server == nil || p.Server.Error != "" || p.Server.CPUCores <= 0 {
		t.Errorf("want checks answered and the empty server's CPU; phase %+v, server %+v", p.Total, p.Server)
	}
}

// clusterWorkload checks the permify data set's content.
const clusterWorkload = `name: cluster
users: 100
generators:
  content: {dist: uniform}
  user: {dist: uniform}
steps:
  - {name: check, type: check, resource: "content:{content}", permission: view, subject: "user:{user}"}
phases:
  - {name: steady, duration: 300ms, closed: {in_flight: 4}}
`

func TestBenchOverSeveralEndpoints(t *testing.T) {
	const key = "cluster-key"
	a, b := startServer(t, key), startServer(t, key)
	both := a + "," + b
	for _, bad := range []string{a + ",," + b, both + "," + a} {
		if r := latch(t, "bench", "gen", "permify", "--users", "10", "--endpoint", bad, "--token", key); r.code != 1 || !strings.Contains(r.err, "--endpoint") {
			t.Errorf("bench gen --endpoint %s: exit %d, stderr %q; want a complaint about --endpoint", bad, r.code, r.err)
		}
	}

	// gen loads the first node only: a cluster's nodes share one datastore.
	if r := latch(t, "bench", "gen", "permify", "--users", "100", "--endpoint", both, "--token", key); r.code != 0 {
		t.Fatalf("bench gen --endpoint %s: %s", both, r.err)
	}
	if r := latch(t, "schema", "read", "--endpoint", b, "--token", key); r.code == 0 {
		t.Errorf("bench gen wrote a schema into the second endpoint too:\n%s", r.out)
	}
	if r := latch(t, "bench", "gen", "permify", "--users", "100", "--endpoint", b, "--token", key); r.code != 0 {
		t.Fatalf("bench gen --endpoint %s: %s", b, r.err)
	}

	dir := t.TempDir()
	wl, jsonPath, htmlPath := filepath.Join(dir, "w.yaml"), filepath.Join(dir, "r.json"), filepath.Join(dir, "r.html")
	if err := os.WriteFile(wl, []byte(clusterWorkload), 0o600); err != nil {
		t.Fatal(err)
	}
	r := latch(t, "bench", "run", wl, "-q", "--endpoint", " "+a+", "+b, "--token", key, "-o", jsonPath, "--html", htmlPath)
	if r.code != 0 {
		t.Fatalf("bench run over %s: exit %d\n%s", both, r.code, r.err)
	}
	res, err := bench.ReadResult(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if tot := res.Phases[0].Total; tot.Count == 0 || len(tot.Errors) > 0 {
		t.Errorf("over both endpoints: %d answers, errors %v", tot.Count, tot.Errors)
	}
	if !slices.Equal(res.Endpoints, []string{a, b}) || res.Target != a+", "+b {
		t.Errorf("result records target %q, endpoints %v; want both, %s first", res.Target, res.Endpoints, a)
	}
	page, err := os.ReadFile(htmlPath)
	if err != nil {
		t.Fatal(err)
	}
	if want := "round-robin over 2 endpoints: <b>" + a + "</b>, <b>" + b + "</b>"; !strings.Contains(string(page), want) {
		t.Errorf("the report does not say %q", want)
	}
}

// TestBenchRunDeepGroupsWorkload runs the reference deep-groups workload, with its
// phases shortened, against an in-process latch loaded with a small deepgroups data set:
// every request, lookups and moves included, must succeed.
func TestBenchRunDeepGroupsWorkload(t *testing.T) {
	src, err := os.ReadFile("../../workloads/deepgroups.yaml")
	if err != nil {
		t.Fatal(err)
	}
	head, _, ok := strings.Cut(string(src), "\nphases:")
	if !ok {
		t.Fatal("workloads/deepgroups.yaml has no phases: section")
	}
	// Two in flight: never more than the server admits at once of either class, so no
	// request can be shed however slowly a loaded machine answers.
	short := head + `
phases:
  - {name: warm-up, warmup: true, duration: 300ms, closed: {in_flight: 2}}
  - {name: closed, duration: 2s, closed: {in_flight: 2}}
`
	dir := t.TempDir()
	wl, jsonPath := filepath.Join(dir, "deep.yaml"), filepath.Join(dir, "deep.json")
	if err := os.WriteFile(wl, []byte(short), 0o600); err != nil {
		t.Fatal(err)
	}
	r := latch(t, "bench", "run", wl, "--in-process", "--users", "2000", "-o", jsonPath)
	if r.code != 0 {
		t.Fatalf("bench run exited %d:\n%s", r.code, r.err)
	}
	res, err := bench.ReadResult(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Phases) != 1 {
		t.Fatalf("%d measured phases, want 1", len(res.Phases))
	}
	for _, s := range res.Phases[0].Steps {
		if len(s.Errors) > 0 {
			t.Errorf("step %s: errors %v", s.Name, s.Errors)
		}
	}
	// Which steps come up in 2 s is chance (the writes are 1% of the mix); that some
	// requests were answered is not.
	if res.Phases[0].Total.Count == 0 {
		t.Errorf("no request was answered: %+v", res.Phases[0].Steps)
	}
}

func TestBenchGenDeepGroupsSizes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "deep.txt")
	r := latch(t, "bench", "gen", "deepgroups", "--users", "300", "--groups", "200", "--folders", "40", "--documents", "500", "-o", path)
	if r.code != 0 {
		t.Fatalf("bench gen deepgroups: %s", r.err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for l := range strings.Lines(strings.TrimSpace(string(b))) {
		x, err := rel.Parse(strings.TrimSpace(l))
		if err != nil {
			t.Fatalf("line %q does not parse: %v", l, err)
		}
		counts[x.Resource.Type+"#"+x.Relation]++
	}
	if counts["document#parent"] != 500 || counts["folder#parent"] >= 40 || counts["group#member"] < 300 {
		t.Errorf("counts %v: want 500 documents, under 40 folder parents, 300 users and 199 groups in groups", counts)
	}
	if r := latch(t, "bench", "gen", "social", "--users", "300", "--groups", "20", "-o", path); r.code != 1 || !strings.Contains(r.err, "deepgroups data set, not social") {
		t.Errorf("--groups with social: exit %d, stderr %q", r.code, r.err)
	}
}
