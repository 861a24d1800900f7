package config

// GPU holds the gpu.* checks' settings (design.md §5). Every threshold can
// be overridden per host in a [[host]] section like any other key.
type GPU struct {
	Count   GPUCount   `toml:"count"`
	Driver  GPUDriver  `toml:"driver"`
	Lost    Common     `toml:"lost"`
	XID     XID        `toml:"xid"`
	Memory  GPUMemory  `toml:"memory"`
	PCIe    GPUPCIe    `toml:"pcie"`
	NVLink  GPUNVLink  `toml:"nvlink"`
	Fabric  Common     `toml:"fabric"`
	Thermal GPUThermal `toml:"thermal"`
	Power   Common     `toml:"power"`
	Config  GPUConfig  `toml:"config"`
}

// GPUCount compares NVML's device count with what the node should have.
type GPUCount struct {
	Common
	// Expected is the GPU count; -1 means the number of NVIDIA display or
	// 3D controllers on the PCI bus, 0 means the node has no GPUs.
	Expected int `toml:"expected"`
}

// GPUDriver pins the driver version.
type GPUDriver struct {
	Common
	MinVersion   string `toml:"min_version"`   // e.g. "550.54.15"; "" for none
	ExactVersion string `toml:"exact_version"` // "" for none
}

// XID classifies NVIDIA XID events read from the kernel log.
type XID struct {
	Common
	// Kmsg is the kernel log device, under root.
	Kmsg string `toml:"kmsg"`
	// Drain lists XIDs that fail the GPU; Warn those only counted.
	Drain []int `toml:"drain"`
	Warn  []int `toml:"warn"`
}

// GPUMemory judges ECC, row remapping and retired pages.
type GPUMemory struct {
	Common
	// CorrectableWarn warns when volatile corrected ECC errors exceed it.
	CorrectableWarn uint64 `toml:"correctable_warn"`
	// RetiredPagesFail fails at this many retired pages (pre-Ampere).
	RetiredPagesFail int `toml:"retired_pages_fail"`
}

// GPUPCIe judges the PCIe link of each GPU.
type GPUPCIe struct {
	Common
	// ReplayWarnDelta warns when the replay counter grew by more than this
	// since the previous run.
	ReplayWarnDelta uint64 `toml:"replay_warn_delta"`
}

// GPUNVLink judges NVLink state and error counters.
type GPUNVLink struct {
	Common
	// ExpectedLinks per GPU; -1 means every link the GPU reports.
	ExpectedLinks int `toml:"expected_links"`
	// Largest growth since the previous run, per link.
	CRCDeltaMax      uint64 `toml:"crc_delta_max"`
	ReplayDeltaMax   uint64 `toml:"replay_delta_max"`
	RecoveryDeltaMax uint64 `toml:"recovery_delta_max"`
}

// GPUThermal compares temperatures with NVML's own per-device thresholds.
type GPUThermal struct {
	Common
	// MarginCelsius: WARN this close to the slowdown threshold; FAIL at it.
	MarginCelsius float64 `toml:"margin_celsius"`
}

// GPUConfig checks GPU settings that jobs rely on.
type GPUConfig struct {
	Common
	// Persistence: "warn" or "fail" when persistence mode is off, or "off".
	Persistence string `toml:"persistence"`
	// MIG: "enabled", "disabled" or "any".
	MIG string `toml:"mig"`
	// ComputeMode: "default", "exclusive_process", "prohibited" or "any".
	ComputeMode string `toml:"compute_mode"`
}

// DefaultXIDDrain and DefaultXIDWarn are design.md §5's table.
var (
	DefaultXIDDrain = []int{48, 62, 64, 74, 79, 95, 109, 119, 120, 140, 144, 145, 146, 147, 148, 149, 150}
	DefaultXIDWarn  = []int{13, 31, 43, 45, 63, 92, 94}
)

func defaultGPU() GPU {
	on := Common{Enabled: true}
	return GPU{
		Count:   GPUCount{Common: on, Expected: -1},
		Driver:  GPUDriver{Common: on},
		Lost:    on,
		XID:     XID{Common: on, Kmsg: "/dev/kmsg", Drain: append([]int(nil), DefaultXIDDrain...), Warn: append([]int(nil), DefaultXIDWarn...)},
		Memory:  GPUMemory{Common: on, CorrectableWarn: 1000, RetiredPagesFail: 60},
		PCIe:    GPUPCIe{Common: on, ReplayWarnDelta: 100},
		NVLink:  GPUNVLink{Common: on, ExpectedLinks: -1, CRCDeltaMax: 100, ReplayDeltaMax: 100, RecoveryDeltaMax: 1},
		Fabric:  on,
		Thermal: GPUThermal{Common: on, MarginCelsius: 5},
		Power:   on,
		Config:  GPUConfig{Common: on, Persistence: "warn", MIG: "any", ComputeMode: "any"},
	}
}
