package config

// GPU holds the gpu.* checks' settings (docs/architecture.md#gpu-checks).
// Every threshold can be overridden per host in a [[host]] section like any
// other key.
type GPU struct {
	Count  GPUCount  `toml:"count"`
	Driver GPUDriver `toml:"driver"`
	Lost   Common    `toml:"lost"`
	XID    XID       `toml:"xid"`
	// Recovery is gpu.recovery: NVML's GPU recovery action.
	Recovery GPURecovery `toml:"recovery"`
	Memory   GPUMemory   `toml:"memory"`
	PCIe     GPUPCIe     `toml:"pcie"`
	NVLink   GPUNVLink   `toml:"nvlink"`
	Fabric   Common      `toml:"fabric"`
	Thermal  GPUThermal  `toml:"thermal"`
	Power    Common      `toml:"power"`
	Config   GPUConfig   `toml:"config"`
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

// XID judges NVIDIA XID events read from the kernel log. NVIDIA's XID
// catalogue (internal/xid/catalog.go) is the default; these keys are a
// site's overrides of it.
type XID struct {
	Common
	// Kmsg is the kernel log device, under root.
	Kmsg string `toml:"kmsg"`
	// Drain lists XIDs that always fail the GPU, Warn those only
	// reported: the older way to override the catalogue, still accepted.
	// Empty by default.
	Drain []int `toml:"drain"`
	Warn  []int `toml:"warn"`
	// EscalateAfter: a drain-class XID seen on the same GPU (by serial)
	// in more than this many boots asks for an RMA; 0 never.
	EscalateAfter int `toml:"escalate_after"`
	// Override replaces the catalogue's verdict for single XIDs.
	Override []XIDOverride `toml:"override"`
}

// XIDOverride is a site's verdict for one XID, in place of the
// catalogue's (and of its decode of the line).
type XIDOverride struct {
	XID int `toml:"xid"`
	// Status is "ok" (not reported), "warn" or "fail".
	Status string `toml:"status"`
	// Action for a "fail": drain, drain-after-job, reset-gpu, reboot or
	// rma; "" takes the catalogue's action for the code.
	Action string `toml:"action"`
	// EscalateAfter replaces checks.gpu.xid.escalate_after for this XID;
	// 0 keeps it, -1 never escalates.
	EscalateAfter int `toml:"escalate_after"`
}

// GPURecovery reads the driver's GPU recovery action from NVML.
type GPURecovery struct {
	Common
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
	MarginCelsius float64 `toml:"margin_celsius" unit:"°C"`
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

// DefaultXIDEscalateAfter is checks.gpu.xid.escalate_after's default.
const DefaultXIDEscalateAfter = 2

func defaultGPU() GPU {
	on := Common{Enabled: true}
	return GPU{
		Count:    GPUCount{Common: on, Expected: -1},
		Driver:   GPUDriver{Common: on},
		Lost:     on,
		XID:      XID{Common: on, Kmsg: "/dev/kmsg", EscalateAfter: DefaultXIDEscalateAfter},
		Recovery: GPURecovery{Common: on},
		Memory:   GPUMemory{Common: on, CorrectableWarn: 1000, RetiredPagesFail: 60},
		PCIe:     GPUPCIe{Common: on, ReplayWarnDelta: 100},
		NVLink:   GPUNVLink{Common: on, ExpectedLinks: -1, CRCDeltaMax: 100, ReplayDeltaMax: 100, RecoveryDeltaMax: 1},
		Fabric:   on,
		Thermal:  GPUThermal{Common: on, MarginCelsius: 5},
		Power:    on,
		Config:   GPUConfig{Common: on, Persistence: "warn", MIG: "any", ComputeMode: "any"},
	}
}
