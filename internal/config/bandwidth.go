package config

import "time"

// Bandwidth configures the bandwidth validation (design.md §5 floors).
type Bandwidth struct {
	Common
}

func defaultBandwidth() Bandwidth {
	return Bandwidth{Common: Common{Enabled: true}}
}

func (ps *problems) bandwidth(c Bandwidth, deadline time.Duration) {
	ps.timeout("checks.bandwidth.timeout", c.Timeout.Duration, deadline, true)
}
