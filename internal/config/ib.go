package config

import "time"

// IB holds the ib.* checks' settings (design.md §6).
type IB struct {
	Port IBPort `toml:"port"`
}

// IBPort judges each InfiniBand/RoCE port's state and speed.
type IBPort struct {
	Common
}

func defaultIB() IB {
	on := Common{Enabled: true}
	return IB{Port: IBPort{Common: on}}
}

func (ps *problems) ib(c IB, deadline time.Duration) {
	ps.timeout("checks.ib.port.timeout", c.Port.Timeout.Duration, deadline, true)
}
