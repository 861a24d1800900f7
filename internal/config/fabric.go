package config

import "time"

// Fabric holds the fabric.* checks' settings (design.md §5).
type Fabric struct {
	Manager FabricManager `toml:"manager"`
}

// FabricManager checks NVIDIA Fabric Manager on NVSwitch systems.
type FabricManager struct {
	Common
}

func defaultFabric() Fabric {
	return Fabric{Manager: FabricManager{Common: Common{Enabled: true}}}
}

func (ps *problems) fabric(c Fabric, deadline time.Duration) {
	ps.timeout("checks.fabric.manager.timeout", c.Manager.Timeout.Duration, deadline, true)
}
