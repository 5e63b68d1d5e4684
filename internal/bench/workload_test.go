package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const okWorkload = `name: t
users: 100
generators:
  u: {dist: zipf}
  c: {dist: uniform, n: 50}
steps:
  - name: check
    type: check
    weight: 3
    resource: content:c{c}
    permission: view
    subject: user:u{u}
phases:
  - {name: w, warmup: true, duration: 1s, closed: {in_flight: 2}}
  - name: ramp
    open:
      start_rate: 10
      stages: [{target: 100, duration: 2s}]
`

func TestParseWorkload(t *testing.T) {
	w, err := ParseWorkload([]byte(okWorkload))
	if err != nil {
		t.Fatal(err)
	}
	if w.Generators["u"].Spec.N != 100 || w.Generators["c"].Spec.N != 50 {
		t.Errorf("generator sizes %d, %d: want n from users (100) and the explicit 50", w.Generators["u"].Spec.N, w.Generators["c"].Spec.N)
	}
	s := w.Steps[0]
	if s.Resource.Type != "content" || s.Resource.Prefix != "c" || s.Resource.Generator != "c" || s.Weight != 3 || s.Consistency != "minimize_latency" {
		t.Errorf("step parsed as %+v", s)
	}
	p := w.Phases[1]
	if !p.Load.Open || p.Duration != 2*time.Second || p.Load.StartRate != 10 || p.Load.MaxInFlight != 100 {
		t.Errorf("open phase parsed as %+v", p)
	}
	if err := w.SetUsers(7); err != nil || w.Generators["u"].Spec.N != 7 || w.Generators["c"].Spec.N != 50 {
		t.Errorf("SetUsers(7): %v, sizes %d, %d", err, w.Generators["u"].Spec.N, w.Generators["c"].Spec.N)
	}
}

func TestParseWorkloadErrorsNameTheLine(t *testing.T) {
	replace := func(old, new string) string {
		if !strings.Contains(okWorkload, old) {
			t.Fatalf("fixture lacks %q", old)
		}
		return strings.Replace(okWorkload, old, new, 1)
	}
	cases := []struct {
		name, src, want string
	}{
		{"unknown step type", replace("type: check", "type: chek"), `line 8: step "check": type "chek"`},
		{"unknown generator", replace("content:c{c}", "content:c{x}"), `line 10: step "check": resource uses generator {x}`},
		{"bad template", replace("content:c{c}", "content"), `line 10: step "check": resource: want type:id`},
		{"unknown key", replace("weight: 3", "wieght: 3"), `line 9: step has unknown key "wieght"`},
		{"bad weight", replace("weight: 3", "weight: lots"), `line 9: step: weight must be a whole number`},
		{"bad distribution", replace("dist: zipf", "dist: gauss"), `line 4: generator "u": unknown distribution "gauss"`},
		{"bad duration", replace("duration: 1s", "duration: soon"), `line 14: phase: duration must be a duration`},
		{"two load models", replace("closed: {in_flight: 2}", "closed: {in_flight: 2}, open: {rate: 3}"), `line 14: phase "w" needs exactly one load model`},
		{"zero in flight", replace("in_flight: 2", "in_flight: 0"), `line 14: phase "w": closed in_flight must be in [1, 100000]`},
		{"bad stage", replace("target: 100, duration: 2s", "target: 100"), `line 18: phase "ramp": a stage needs`},
		{"bad consistency", replace("permission: view", "permission: view\n    consistency: strong"), `line 12: step "check": consistency "strong"`},
		{"missing permission", replace("    permission: view\n", ""), `line 7: step "check": a check step needs a permission`},
		{"not yaml", "steps: [", "not valid YAML"},
		{"yaml syntax line", "name: x\nsteps:\n  - name: a\n   bad: [", "line"},
		{"duplicate step", replace("phases:", "  - {name: check, type: check, resource: \"c:1\", permission: v, subject: \"u:1\"}\nphases:"), `line 13: step name "check" is used twice`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseWorkload([]byte(c.src))
			if err == nil {
				t.Fatalf("accepted:\n%s", c.src)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q, want it to contain %q", err, c.want)
			}
		})
	}
}

func TestGeneratorWithoutSize(t *testing.T) {
	src := strings.Replace(okWorkload, "users: 100\n", "", 1)
	_, err := ParseWorkload([]byte(src))
	if err == nil || !strings.Contains(err.Error(), `generator "u" has no n`) {
		t.Errorf("got %v, want an error naming the unsized generator", err)
	}
}

func TestReferenceWorkloadsParse(t *testing.T) {
	files, _ := filepath.Glob("../../workloads/*.yaml")
	if len(files) < 2 {
		t.Fatalf("found %d reference workloads in ../../workloads, want social and permify at least", len(files))
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseWorkload(src); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestParseTemplate(t *testing.T) {
	for _, c := range []struct {
		in       string
		typeOnly bool
		want     Template
	}{
		{"user:u{users}", false, Template{Type: "user", Prefix: "u", Generator: "users"}},
		{"group:g{g}x#member", false, Template{Type: "group", Prefix: "g", Generator: "g", Suffix: "x", Relation: "member"}},
		{"user:alice", false, Template{Type: "user", Prefix: "alice"}},
		{"content", true, Template{Type: "content"}},
		{"group#member", true, Template{Type: "group", Relation: "member"}},
	} {
		got, err := ParseTemplate(c.in, c.typeOnly)
		if err != nil || got != c.want {
			t.Errorf("ParseTemplate(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		}
		if got.String() != c.in {
			t.Errorf("String() = %q, want %q", got.String(), c.in)
		}
	}
	for _, bad := range []string{"user", "user:{a}{b}", "user:{", "user:}", ":x", "user:u#", "user:{}"} {
		if _, err := ParseTemplate(bad, false); err == nil {
			t.Errorf("ParseTemplate(%q) accepted it", bad)
		}
	}
}

func TestArrivals(t *testing.T) {
	m := LoadModel{Open: true, StartRate: 10, Stages: []Stage{{Target: 100, Duration: 10 * time.Second}, {Target: 100, Duration: 5 * time.Second}}}
	for _, c := range []struct {
		t    time.Duration
		want float64
	}{
		{0, 0}, {10 * time.Second, 550}, {15 * time.Second, 1050}, {17 * time.Second, 1250}, {5 * time.Second, 50 + 225.0/2*1},
	} {
		if got := m.Arrivals(c.t); got < c.want-1e-6 || got > c.want+1e-6 {
			t.Errorf("Arrivals(%s) = %g, want %g", c.t, got, c.want)
		}
	}
	for at, want := range map[time.Duration]float64{0: 10, 5 * time.Second: 55, 12 * time.Second: 100, time.Minute: 100} {
		if got := m.Rate(at); got != want {
			t.Errorf("Rate(%s) = %g, want %g", at, got, want)
		}
	}
	constant := LoadModel{Open: true, StartRate: 200}
	if got := constant.Arrivals(1500 * time.Millisecond); got != 300 {
		t.Errorf("constant 200/s over 1.5s: %g arrivals, want 300", got)
	}
}

func FuzzParseWorkload(f *testing.F) {
	f.Add(okWorkload)
	f.Add("steps: 5")
	f.Add("- a\n- b")
	f.Add("generators: {x: 5}\nsteps: [{name: a}]")
	f.Add("users: 1\ngenerators: {g: {dist: dau, factor: 0.0001}}\nsteps: [{name: a, type: read, resource: 'x:{g}'}]\nphases: [{open: {rate: 0}, duration: 1s}]")
	f.Fuzz(func(t *testing.T, src string) {
		w, err := ParseWorkload([]byte(src))
		if err != nil {
			return
		}
		// Whatever parses must be runnable: sized generators and a step to pick.
		p := newPlan(w)
		if p.weights[len(p.weights)-1] <= 0 {
			t.Fatalf("parsed a workload with no weight: %q", src)
		}
		for name, g := range w.Generators {
			if err := g.Spec.Validate(); err != nil {
				t.Fatalf("generator %s invalid after parsing: %v", name, err)
			}
		}
	})
}

func TestGeneratorScale(t *testing.T) {
	src := strings.Replace(okWorkload, "u: {dist: zipf}", "u: {dist: zipf, scale: 2.5}", 1)
	w, err := ParseWorkload([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if n := w.Generators["u"].Spec.N; n != 250 {
		t.Errorf("scale 2.5 of 100 users sized the generator at %d, want 250", n)
	}
	if err := w.SetUsers(10); err != nil || w.Generators["u"].Spec.N != 25 {
		t.Errorf("after SetUsers(10): n %d, err %v; want 25", w.Generators["u"].Spec.N, err)
	}
	for _, bad := range []string{"c: {dist: uniform, n: 50, scale: 2}", "c: {dist: uniform, scale: 0}"} {
		src := strings.Replace(okWorkload, "c: {dist: uniform, n: 50}", bad, 1)
		if _, err := ParseWorkload([]byte(src)); err == nil || !strings.Contains(err.Error(), `generator "c": scale must be > 0`) {
			t.Errorf("%s: got %v, want an error naming the scale", bad, err)
		}
	}
}

// TestPairedDraws holds that a step's subject repeats its resource's draw when both
// name one generator, and draws its own otherwise.
func TestPairedDraws(t *testing.T) {
	src := strings.Replace(okWorkload, "subject: user:u{u}", "subject: user:u{c}", 1)
	w, err := ParseWorkload([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	wk := newGRPCWorker(newPlan(w), nil, 1, 0)
	res, sub := wk.drawers(w.Steps[0])
	for range 100 {
		if r, s := res.id(), sub.id(); strings.TrimPrefix(r, "c") != strings.TrimPrefix(s, "u") {
			t.Fatalf("resource %s drawn with subject %s, want the same number", r, s)
		}
	}
	w, err = ParseWorkload([]byte(okWorkload))
	if err != nil {
		t.Fatal(err)
	}
	wk = newGRPCWorker(newPlan(w), nil, 1, 0)
	res, sub = wk.drawers(w.Steps[0])
	same := 0
	for range 100 {
		if r, s := res.id(), sub.id(); strings.TrimPrefix(r, "c") == strings.TrimPrefix(s, "u") {
			same++
		}
	}
	if same > 20 {
		t.Errorf("%d of 100 draws from two generators gave one number: they are not independent", same)
	}
}
