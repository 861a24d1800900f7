package config

import "time"

// Topology checks how GPUs and HCAs sit on the PCI hierarchy.
type Topology struct {
	Common
}

func defaultTopology() Topology {
	return Topology{Common: Common{Enabled: true}}
}

func (ps *problems) topology(c Topology, deadline time.Duration) {
	ps.timeout("checks.topology.timeout", c.Timeout.Duration, deadline, true)
}
