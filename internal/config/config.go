// Package config holds gpuhc's configuration: its schema, defaults, strict
// TOML loading and per-host overrides.
package config

import (
	"strings"
	"time"
)

// DefaultPath is where the packaged configuration lives.
const DefaultPath = "/etc/gpuhc/gpuhc.toml"

// Config is the whole gpuhc.toml after defaults and the host's overrides.
type Config struct {
	// Root prefixes every /proc and /sys path the checks read, so tests
	// can point them at fixture trees. "/" on a real node.
	Root     string   `toml:"root"`
	StateDir string   `toml:"state_dir"`
	LockFile string   `toml:"lock_file"`
	Deadline Duration `toml:"deadline"`
	// CheckTimeout is the default per-check limit; a check section may
	// set its own timeout.
	CheckTimeout Duration `toml:"check_timeout"`

	Log     Log     `toml:"log"`
	Events  Events  `toml:"events"`
	Metrics Metrics `toml:"metrics"`
	Policy  Policy  `toml:"policy"`
	Slurm   Slurm   `toml:"slurm"`
	Checks  Checks  `toml:"checks"`
	Prolog  Prolog  `toml:"prolog"`
	Epilog  Epilog  `toml:"epilog"`
	// Remediate is off by default (docs/remediation.md).
	Remediate Remediate `toml:"remediate"`
}

// Log configures logrus output. Text always goes to stderr.
type Log struct {
	Level string `toml:"level"` // debug, info, warn, error
	File  string `toml:"file"`  // JSON lines, appended; empty for none
	// Syslog also sends every record that reaches stderr to the local
	// syslog daemon's socket, for sites that collect logs there.
	Syslog bool `toml:"syslog"`
	// SyslogFacility is a name SyslogFacilityCode knows.
	SyslogFacility string `toml:"syslog_facility"`
	// SyslogTag names the records; "" means the program's name
	// ("gpuhc-healthcheck").
	SyslogTag string `toml:"syslog_tag"`
	// SyslogSocket is the daemon's datagram socket.
	SyslogSocket string `toml:"syslog_socket"`
}

// SyslogFacilityCode is the syslog code of a facility [log]
// syslog_facility accepts: user, daemon, local0 to local7. kern is the
// kernel's; auth and authpriv are for security records, which sites often
// route to restricted files.
func SyslogFacilityCode(name string) (int, bool) {
	switch name {
	case "user":
		return 1, true
	case "daemon":
		return 3, true
	}
	if n, ok := strings.CutPrefix(name, "local"); ok && len(n) == 1 && n[0] >= '0' && n[0] <= '7' {
		return 16 + int(n[0]-'0'), true
	}
	return 0, false
}

// MaxSyslogTag is RFC 3164's limit on a tag's length.
const MaxSyslogTag = 32

// Events configures the failure event log
// (docs/architecture.md#events-and-mttf).
type Events struct {
	File string `toml:"file"`
	// Heartbeat is the least time between two heartbeat events, which
	// record the operating hours a node has been observed for (MTTF's
	// numerator). At least MinHeartbeat.
	Heartbeat Duration `toml:"heartbeat"`
}

// MinHeartbeat is the shortest heartbeat interval accepted: heartbeats
// exist for MTTF in hours, and more would only grow the event log.
const MinHeartbeat = time.Hour

// Metrics configures the Prometheus textfile metrics.
type Metrics struct {
	// TextfileDir is node_exporter's --collector.textfile.directory; the
	// health check writes gpuhc.prom there after every run. Empty: off.
	TextfileDir string `toml:"textfile_dir"`
}

// Policy decides when to drain and resume.
type Policy struct {
	DryRun bool `toml:"dry_run"`
	// DrainOnError drains on ERROR ("could not check") too. Off by default:
	// a bug of ours must not drain a node.
	DrainOnError bool `toml:"drain_on_error"`
	// ResumeAfter is how many consecutive healthy runs resume a node we drained.
	ResumeAfter int `toml:"resume_after"`
	// AutoResume can be turned off where admins want to resume by hand.
	AutoResume bool `toml:"auto_resume"`
	// The storm guard (docs/architecture.md#storm-guard): gpuhc does
	// not drain a node while too many others are already drained by
	// gpuhc. MaxDrainedFraction limits them to a share of all nodes (0
	// disables that limit), MaxDrainedNodes to a number (0 disables
	// that limit). Whatever the limits, one node may always be drained.
	MaxDrainedFraction float64 `toml:"max_drained_fraction" unit:"fraction of all nodes, 0 to 1"`
	MaxDrainedNodes    int     `toml:"max_drained_nodes"`
	// StormCache is how long the guard's count of drained nodes is
	// trusted to refuse a drain without listing the nodes again; 0 lists
	// every time.
	StormCache Duration `toml:"storm_cache"`
	// StormJitter spreads the guard's node listing over this long: slurmd
	// runs the health check on every node at once, and nodes that count
	// at the same moment all see room. Also spreads the load on slurmctld.
	StormJitter Duration `toml:"storm_jitter"`
}

// Slurm configures node control.
type Slurm struct {
	Backend   string   `toml:"backend"`  // auto, rest, scontrol
	Scontrol  string   `toml:"scontrol"` // absolute path
	URL       string   `toml:"url"`      // http(s)://host:port or unix:/path; empty disables REST
	TokenFile string   `toml:"token_file"`
	User      string   `toml:"user"` // X-SLURM-USER-NAME
	Timeout   Duration `toml:"timeout"`
	Retries   int      `toml:"retries"`
	// HealthCheckTimeout is the limit slurmd kills the health check at
	// (Slurm 26.05's HealthCheckTimeout). 0s: read it from slurm.conf, or
	// 60s (see docs/slurm-timeouts.md).
	HealthCheckTimeout Duration `toml:"health_check_timeout"`
}

// Checks holds one section per check.
type Checks struct {
	Thermal   Thermal   `toml:"thermal"`
	Modules   Modules   `toml:"modules"`
	Processes Processes `toml:"processes"`
	Mounts    Mounts    `toml:"mounts"`
	Memory    Memory    `toml:"memory"`
	CPU       CPU       `toml:"cpu"`
	GPU       GPU       `toml:"gpu"`
	IB        IB        `toml:"ib"`
	Fabric    Fabric    `toml:"fabric"`
	Topology  Topology  `toml:"topology"`
	Bandwidth Bandwidth `toml:"bandwidth"`
	Kernel    Kernel    `toml:"kernel"`
}

// Common is embedded in every check section.
type Common struct {
	Enabled bool     `toml:"enabled"`
	Timeout Duration `toml:"timeout"` // 0: the global check_timeout
}

// Thermal compares hwmon temp*_input and thermal zones to limits.
type Thermal struct {
	Common
	WarnCelsius float64 `toml:"warn_celsius" unit:"°C"`
	FailCelsius float64 `toml:"fail_celsius" unit:"°C"`
	// CPU limits judge coretemp, k10temp and zenpower sensors and the
	// x86_pkg_temp zone; HCA limits judge mlx5 adapters. 0 = the general
	// limit.
	CPUWarnCelsius float64 `toml:"cpu_warn_celsius" unit:"°C"`
	CPUFailCelsius float64 `toml:"cpu_fail_celsius" unit:"°C"`
	HCAWarnCelsius float64 `toml:"hca_warn_celsius" unit:"°C"`
	HCAFailCelsius float64 `toml:"hca_fail_celsius" unit:"°C"`
	// UseSensorLimits also fails at a sensor's own temp*_crit when lower.
	UseSensorLimits bool `toml:"use_sensor_limits"`
	// Exclude lists sensor names (hwmon name or zone type) to ignore; globs.
	Exclude []string `toml:"exclude"`
}

// Modules lists kernel modules that must be loaded (/proc/modules).
type Modules struct {
	Common
	Required []string `toml:"required"`
}

// Processes lists process names (/proc/<pid>/comm) that must be running.
type Processes struct {
	Common
	Required []string `toml:"required"`
}

// Mounts lists mount points that must be present.
type Mounts struct {
	Common
	Mount []Mount `toml:"mount"`
}

// Mount is one required mount point.
type Mount struct {
	Path     string `toml:"path"`
	FSType   string `toml:"fstype"`   // optional: expected filesystem type
	Writable bool   `toml:"writable"` // create and remove a probe file
	// MinFree is a floor on free space: "10GiB", "500MB" or "5%".
	MinFree string `toml:"min_free" unit:"bytes (a size) or % of the filesystem"`
}

// Memory checks MemTotal against an expectation.
type Memory struct {
	Common
	// MinTotal is the least acceptable MemTotal ("1000GiB"); empty: report only.
	MinTotal string `toml:"min_total" unit:"bytes (a size)"`
}

// CPU checks the online CPU count.
type CPU struct {
	Common
	Expected int `toml:"expected"` // 0: report only
}

// Duration is a time.Duration written as "45s" in TOML.
type Duration struct{ time.Duration }

// UnmarshalText parses Go duration syntax.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// MarshalText writes Go duration syntax.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// Default returns the configuration used when no file exists. It is safe
// on any Linux host: nothing is required that a fresh node lacks.
func Default() Config {
	on := Common{Enabled: true}
	return Config{
		Root:         "/",
		StateDir:     "/var/lib/gpuhc",
		LockFile:     "/run/gpuhc/healthcheck.lock",
		Deadline:     Duration{45 * time.Second},
		CheckTimeout: Duration{10 * time.Second},
		Log:          Log{Level: "info", SyslogFacility: "daemon", SyslogSocket: "/dev/log"},
		Events:       Events{File: "/var/log/gpuhc/events.jsonl", Heartbeat: Duration{24 * time.Hour}},
		Policy: Policy{
			ResumeAfter: 2, AutoResume: true,
			MaxDrainedFraction: 0.10, StormCache: Duration{60 * time.Second}, StormJitter: Duration{5 * time.Second},
		},
		Slurm: Slurm{
			Backend:   "auto",
			Scontrol:  "/usr/bin/scontrol",
			TokenFile: "/etc/gpuhc/slurmrestd.token",
			User:      "slurm",
			Timeout:   Duration{5 * time.Second},
			Retries:   3,
		},
		Prolog:    defaultProlog(),
		Epilog:    defaultEpilog(),
		Remediate: defaultRemediate(),
		Checks: Checks{
			Thermal: Thermal{Common: on, WarnCelsius: 85, FailCelsius: 95, UseSensorLimits: true,
				CPUWarnCelsius: 90, CPUFailCelsius: 100, HCAWarnCelsius: 95, HCAFailCelsius: 105},
			Modules:   Modules{Common: on},
			Processes: Processes{Common: on},
			Mounts:    Mounts{Common: on},
			Memory:    Memory{Common: on},
			CPU:       CPU{Common: on},
			GPU:       defaultGPU(),
			IB:        defaultIB(),
			Fabric:    defaultFabric(),
			Topology:  defaultTopology(),
			Bandwidth: defaultBandwidth(),
			Kernel:    Kernel{Common: on},
		},
	}
}
