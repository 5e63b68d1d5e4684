//go:build unix

package bench

import (
	"syscall"
	"time"
)

// readCPU samples this process's CPU time. In --in-process runs the server shares the
// process, so the figure covers both.
func readCPU() cpuSample {
	var ru syscall.Rusage
	s := cpuSample{at: time.Now()}
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		s.user = time.Duration(ru.Utime.Nano())
		s.sys = time.Duration(ru.Stime.Nano())
	}
	return s
}
