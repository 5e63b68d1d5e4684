package bench

import (
	"fmt"
	"html"
	"html/template"
	"io"
	"math"
	"sort"
	"strings"
)

// WriteHTML writes a self-contained report of r: tables and inline SVG charts, no
// scripts or styles fetched from anywhere.
func WriteHTML(w io.Writer, r *Result) error {
	return reportTmpl.Execute(w, reportData{R: r})
}

type reportData struct{ R *Result }

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"}

type series struct {
	name string
	xs   []float64
	ys   []float64
}

const chartW, chartH, padL, padB, padT, padR = 720.0, 240.0, 60.0, 30.0, 12.0, 150.0

// lineChart draws series as lines over shared axes.
func lineChart(title, unit string, ss []series) template.HTML {
	var maxX, maxY float64
	for _, s := range ss {
		for i := range s.xs {
			maxX, maxY = math.Max(maxX, s.xs[i]), math.Max(maxY, s.ys[i])
		}
	}
	maxX, maxY = math.Max(maxX, 1e-9), niceCeil(maxY)
	pw, ph := chartW-padL-padR, chartH-padT-padB
	var b strings.Builder
	fmt.Fprintf(&b, `<figure><figcaption>%s</figcaption><svg viewBox="0 0 %g %g" width="%g" height="%g" role="img">`, html.EscapeString(title), chartW, chartH, chartW, chartH)
	axes(&b, maxX, maxY, unit, "s")
	for i, s := range ss {
		color := palette[i%len(palette)]
		var pts []string
		for j := range s.xs {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", padL+s.xs[j]/maxX*pw, padT+ph-s.ys[j]/maxY*ph))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`, color, strings.Join(pts, " "))
		fmt.Fprintf(&b, `<rect x="%g" y="%d" width="10" height="10" fill="%s"/><text x="%g" y="%d">%s</text>`,
			chartW-padR+10, int(padT)+i*16, color, chartW-padR+24, int(padT)+i*16+9, html.EscapeString(s.name))
	}
	b.WriteString("</svg></figure>")
	return template.HTML(b.String())
}

// axes draws the frame, four y gridlines and x ticks.
func axes(b *strings.Builder, maxX, maxY float64, yUnit, xUnit string) {
	pw, ph := chartW-padL-padR, chartH-padT-padB
	fmt.Fprintf(b, `<rect x="%g" y="%g" width="%g" height="%g" fill="none" stroke="#999"/>`, padL, padT, pw, ph)
	for i := 0; i <= 4; i++ {
		y := padT + ph - float64(i)/4*ph
		fmt.Fprintf(b, `<line x1="%g" x2="%g" y1="%.1f" y2="%.1f" stroke="#eee"/><text x="%g" y="%.1f" text-anchor="end">%s</text>`,
			padL, padL+pw, y, y, padL-4, y+4, html.EscapeString(fmtNum(maxY*float64(i)/4)+yUnit))
	}
	if xUnit == "" {
		return
	}
	for i := 0; i <= 5; i++ {
		x := padL + float64(i)/5*pw
		fmt.Fprintf(b, `<text x="%.1f" y="%g" text-anchor="middle">%s%s</text>`, x, chartH-10, fmtNum(maxX*float64(i)/5), xUnit)
	}
}

// histogramChart draws log-spaced buckets as equal-width bars.
func histogramChart(title string, bs []Bucket) template.HTML {
	var maxC int64
	for _, bk := range bs {
		maxC = max(maxC, bk.Count)
	}
	pw, ph := chartW-padL-padR, chartH-padT-padB
	var b strings.Builder
	fmt.Fprintf(&b, `<figure><figcaption>%s</figcaption><svg viewBox="0 0 %g %g" width="%g" height="%g" role="img">`, html.EscapeString(title), chartW, chartH, chartW, chartH)
	top := niceCeil(float64(maxC))
	axes(&b, 0, top, "", "")
	bw := pw / math.Max(float64(len(bs)), 1)
	for i, bk := range bs {
		h := float64(bk.Count) / top * ph
		x := padL + float64(i)*bw
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>≤ %s ms: %d</title></rect>`,
			x+1, padT+ph-h, math.Max(bw-2, 1), h, palette[0], fmtNum(bk.UpTo), bk.Count)
		if step := max(1, len(bs)/8); i%step == 0 {
			fmt.Fprintf(&b, `<text x="%.1f" y="%g" text-anchor="middle">%sms</text>`, x+bw/2, chartH-10, fmtNum(bk.UpTo))
		}
	}
	b.WriteString("</svg></figure>")
	return template.HTML(b.String())
}

func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func fmtNum(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 1:
		return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
	}
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.3f", v), "0"), ".")
}

func latencyChart(p PhaseResult) template.HTML {
	var p50, p90, p99 series
	p50.name, p90.name, p99.name = "p50", "p90", "p99"
	for _, pt := range p.Series {
		p50.xs, p50.ys = append(p50.xs, pt.T), append(p50.ys, pt.P50)
		p90.xs, p90.ys = append(p90.xs, pt.T), append(p90.ys, pt.P90)
		p99.xs, p99.ys = append(p99.xs, pt.T), append(p99.ys, pt.P99)
	}
	return lineChart("Latency percentiles over time (all steps)", "ms", []series{p50, p90, p99})
}

func throughputChart(p PhaseResult) template.HTML {
	total := series{name: "total"}
	byStep := map[string]*series{}
	for _, pt := range p.Series {
		total.xs, total.ys = append(total.xs, pt.T), append(total.ys, pt.Rate)
		for name, rate := range pt.Steps {
			s := byStep[name]
			if s == nil {
				s = &series{name: name}
				byStep[name] = s
			}
			s.xs, s.ys = append(s.xs, pt.T), append(s.ys, rate)
		}
	}
	ss := []series{total}
	names := make([]string, 0, len(byStep))
	for n := range byStep {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		ss = append(ss, *byStep[n])
	}
	return lineChart("Throughput over time (successful requests/s)", "/s", ss)
}

func errorList(m map[string]int64) string {
	if len(m) == 0 {
		return "0"
	}
	var parts []string
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

var reportTmpl = template.Must(template.New("report").Funcs(template.FuncMap{
	"latency": latencyChart, "throughput": throughputChart, "errors": errorList,
	"histogram": func(p PhaseResult) template.HTML {
		return histogramChart("Latency histogram (all steps, log-spaced buckets)", p.Total.Histogram)
	},
	"f1":    func(v float64) string { return fmt.Sprintf("%.1f", v) },
	"f2":    func(v float64) string { return fmt.Sprintf("%.2f", v) },
	"f3":    func(v float64) string { return fmt.Sprintf("%.3f", v) },
	"steps": func(p PhaseResult) []StepResult { return append(append([]StepResult{}, p.Steps...), p.Total) },
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>latch bench: {{.R.Workload}}</title>
<style>
body{font:14px system-ui,sans-serif;margin:2em;color:#222;max-width:1000px}
table{border-collapse:collapse;margin:1em 0}th,td{padding:3px 10px;border-bottom:1px solid #ddd;text-align:right}
th:first-child,td:first-child{text-align:left}svg text{font:11px system-ui,sans-serif;fill:#444}
figure{margin:1.5em 0}figcaption{font-weight:600;margin-bottom:.3em}
</style></head><body>
<h1>latch bench: {{.R.Workload}}</h1>
<p>Target <b>{{.R.Target}}</b> · users {{.R.Users}} · started {{.R.Started.Format "2006-01-02 15:04:05 UTC"}} · GOMAXPROCS {{.R.GOMAXPROCS}}</p>
{{if gt (len .R.Endpoints) 1}}<p>Calls went round-robin over {{len .R.Endpoints}} endpoints: {{range $i, $e := .R.Endpoints}}{{if $i}}, {{end}}<b>{{$e}}</b>{{end}}</p>
{{end}}{{range .R.Phases}}
<section class="phase">
<h2>Phase {{.Name}}</h2>
<p>{{.Load}} · {{f1 .Duration}} s{{if .Scheduled}} · scheduled {{.Scheduled}} · <b>dropped {{.Dropped}}</b>{{end}}
 · generator CPU {{f2 .GeneratorCPU.Cores}} cores (user {{f1 .GeneratorCPU.User}} s, sys {{f1 .GeneratorCPU.Sys}} s)
{{with .Server}} · server CPU {{f2 .CPUCores}} cores{{if ge .CacheHitRatio 0.0}} · cache hit ratio {{f3 .CacheHitRatio}}{{end}}{{if .Error}} · metrics: {{.Error}}{{end}}{{end}}</p>
<table><tr><th>step</th><th>type</th><th>count</th><th>rate/s</th><th>errors</th><th>p50 ms</th><th>p90</th><th>p95</th><th>p99</th><th>p99.9</th><th>max</th></tr>
{{range steps .}}<tr><td>{{.Name}}</td><td>{{.Type}}</td><td>{{.Count}}</td><td>{{f1 .Rate}}</td><td>{{errors .Errors}}</td>
<td>{{f3 .Latency.P50}}</td><td>{{f3 .Latency.P90}}</td><td>{{f3 .Latency.P95}}</td><td>{{f3 .Latency.P99}}</td><td>{{f3 .Latency.P999}}</td><td>{{f3 .Latency.Max}}</td></tr>
{{end}}</table>
{{latency .}}
{{throughput .}}
{{histogram .}}
</section>
{{end}}
</body></html>
`))
