//go:build !unix

package bench

import (
	"runtime/metrics"
	"time"
)

// readCPU samples this process's CPU time from the Go runtime's estimate.
func readCPU() cpuSample {
	m := []metrics.Sample{{Name: "/cpu/classes/user:cpu-seconds"}, {Name: "/cpu/classes/total:cpu-seconds"}}
	metrics.Read(m)
	s := cpuSample{at: time.Now()}
	if m[0].Value.Kind() == metrics.KindFloat64 {
		s.user = time.Duration(m[0].Value.Float64() * float64(time.Second))
	}
	return s
}
