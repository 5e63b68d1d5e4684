package bench

import "time"

type cpuSample struct {
	at        time.Time
	user, sys time.Duration
}

// CPU is the generator's own CPU use over a phase.
type CPU struct {
	Wall  float64 `json:"wall_s"`
	User  float64 `json:"user_s"`
	Sys   float64 `json:"sys_s"`
	Cores float64 `json:"cores"` // (user + sys) / wall
}

func (s cpuSample) since(before cpuSample) CPU {
	wall := s.at.Sub(before.at).Seconds()
	c := CPU{Wall: wall, User: (s.user - before.user).Seconds(), Sys: (s.sys - before.sys).Seconds()}
	if wall > 0 {
		c.Cores = (c.User + c.Sys) / wall
	}
	return c
}
