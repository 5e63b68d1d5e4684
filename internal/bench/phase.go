package bench

import (
	"fmt"
	"time"

	"gopkg.in/yaml.v3"
)

// maxWorkers bounds a phase's worker goroutines: each holds its own request messages.
const maxWorkers = 100_000

func (w *Workload) parsePhases(top *object) error {
	total := 0
	for _, s := range w.Steps {
		total += s.Weight
	}
	if total == 0 {
		return errAt(top.at("steps"), "every step has weight 0: nothing would run")
	}
	items := top.seq("phases")
	if len(items) == 0 && top.err == nil {
		return errAt(top.at("phases"), "workload needs at least one phase under phases:")
	}
	measured := false
	for i, n := range items {
		p, err := parsePhase(n, i)
		if err != nil {
			return err
		}
		measured = measured || !p.Warmup
		w.Phases = append(w.Phases, p)
	}
	if !measured && len(items) > 0 {
		return errAt(items[0], "every phase is a warm-up: nothing would be measured")
	}
	return nil
}

func parsePhase(n *yaml.Node, i int) (Phase, error) {
	o, err := newObject(n, "phase", "name", "warmup", "duration", "closed", "open")
	if err != nil {
		return Phase{}, err
	}
	p := Phase{Name: o.str("name", fmt.Sprintf("phase-%d", i+1)), Warmup: o.boolean("warmup"), Duration: o.duration("duration"), Line: n.Line}
	if o.err != nil {
		return p, o.err
	}
	o.what = fmt.Sprintf("phase %q", p.Name)
	closed, open := o.fields["closed"], o.fields["open"]
	switch {
	case (closed == nil) == (open == nil):
		return p, errAt(n, "%s needs exactly one load model: closed: {in_flight: N} or open: {rate: R}", o.what)
	case closed != nil:
		c, err := newObject(closed, o.what+" closed", "in_flight")
		if err != nil {
			return p, err
		}
		p.Load.InFlight = c.integer("in_flight", 0)
		if c.err != nil {
			return p, c.err
		}
		if p.Load.InFlight <= 0 || p.Load.InFlight > maxWorkers {
			return p, errAt(c.at("in_flight"), "%s: closed in_flight must be in [1, %d]", o.what, maxWorkers)
		}
	default:
		if err := parseOpen(open, o.what, &p.Load); err != nil {
			return p, err
		}
	}
	if p.Duration == 0 {
		p.Duration = p.Load.rampTime()
	}
	if p.Duration <= 0 {
		return p, errAt(o.at("duration"), "%s needs a duration > 0 (or open stages)", o.what)
	}
	return p, nil
}

func parseOpen(n *yaml.Node, what string, m *LoadModel) error {
	o, err := newObject(n, what+" open", "rate", "start_rate", "stages", "max_in_flight")
	if err != nil {
		return err
	}
	m.Open = true
	rate := o.float("rate", 0)
	m.StartRate = o.float("start_rate", rate)
	m.MaxInFlight = o.integer("max_in_flight", 100)
	for _, sn := range o.seq("stages") {
		so, err := newObject(sn, what+" stage", "target", "duration")
		if err != nil {
			return err
		}
		st := Stage{Target: so.float("target", -1), Duration: so.duration("duration")}
		if so.err != nil {
			return so.err
		}
		if st.Target < 0 || st.Duration <= 0 {
			return errAt(sn, "%s: a stage needs target >= 0 and duration > 0", what)
		}
		m.Stages = append(m.Stages, st)
	}
	if o.err != nil {
		return o.err
	}
	if o.has("rate") == (len(m.Stages) > 0) {
		return errAt(n, "%s: give open either rate: R or stages: (with an optional start_rate)", what)
	}
	if rate < 0 || m.StartRate < 0 {
		return errAt(n, "%s: rates must be >= 0", what)
	}
	if m.MaxInFlight <= 0 || m.MaxInFlight > maxWorkers {
		return errAt(o.at("max_in_flight"), "%s: max_in_flight must be in [1, %d]", what, maxWorkers)
	}
	return nil
}

// rampTime is how long the stages take (0 for a constant rate).
func (m LoadModel) rampTime() time.Duration {
	var d time.Duration
	for _, s := range m.Stages {
		d += s.Duration
	}
	return d
}

// Rate is the open model's arrival rate per second at t.
func (m LoadModel) Rate(t time.Duration) float64 {
	from := m.StartRate
	for _, s := range m.Stages {
		if t < s.Duration {
			return from + (s.Target-from)*t.Seconds()/s.Duration.Seconds()
		}
		t -= s.Duration
		from = s.Target
	}
	return from
}

// Arrivals is how many iterations the open model schedules in its first t: the integral
// of the piecewise-linear rate. After the last stage the rate holds at its target.
func (m LoadModel) Arrivals(t time.Duration) float64 {
	from, total := m.StartRate, 0.0
	for _, s := range m.Stages {
		if t <= 0 {
			return total
		}
		d := min(t, s.Duration).Seconds()
		slope := (s.Target - from) / s.Duration.Seconds()
		total += from*d + slope*d*d/2
		t -= s.Duration
		from = s.Target
	}
	if t > 0 {
		total += from * t.Seconds()
	}
	return total
}
