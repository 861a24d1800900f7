package config

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/gpuhc/gpuhc/internal/lazyre"
)

// Fabric holds the fabric.* checks' settings
// (docs/architecture.md#fabric-and-nvswitch).
type Fabric struct {
	Manager FabricManager `toml:"manager"`
	SXid    SXid          `toml:"sxid"`
}

// FabricManager checks NVIDIA Fabric Manager on NVSwitch systems: the
// daemon running, its systemd unit active, no fatal line in its log since
// the last run, and the GPUs registered with the NVLink fabric.
type FabricManager struct {
	Common
	// Process is the daemon's name, matched against /proc/<pid>/comm and
	// argv[0]'s base name.
	Process string `toml:"process"`
	// Unit is the systemd unit that should be running it; "" skips the
	// unit check (Fabric Manager run by a container or by hand).
	Unit string `toml:"unit"`
	// Log is Fabric Manager's LOG_FILE_NAME; "" skips the log.
	Log string `toml:"log"`
	// RotatedLog is where the log's previous generation lives after a
	// rotation; "" means Log + ".1".
	RotatedLog string `toml:"rotated_log"`
	// FatalPatterns are regular expressions (RE2 syntax); a log line
	// matching any of them fails the node.
	FatalPatterns []string `toml:"fatal_patterns"`
	// MaxRead caps the log bytes read per run ("4MiB"); the oldest unread
	// part beyond it is skipped.
	MaxRead string `toml:"max_read" unit:"bytes (a size)"`
	// NVLSMProcess is the NVLink subnet manager's process name. On
	// NVLink5 baseboards (HGX/DGX B200, B300), whose NVSwitches are
	// managed through ConnectX functions (VPD SMDL=SW_MNG) rather than
	// shown on the PCI bus, Fabric Manager needs it running; "" does not
	// check it.
	NVLSMProcess string `toml:"nvlsm_process"`
	// NVLSMUnit is the systemd unit that should run it; "" skips the unit
	// check. NVIDIA's nvidia-fabricmanager-start.sh starts nvlsm inside
	// nvidia-fabricmanager.service; some distributions ship their own
	// unit (nvlsm.service, nvidia-nvlsm.service).
	NVLSMUnit string `toml:"nvlsm_unit"`
}

// DefaultFatalPatterns are the Fabric Manager log lines that mean the
// NVLink fabric is broken until a reset:
//   - an NVSwitch fatal SXid, e.g. "[Jul 23 2024 07:53:55] [ERROR] [tid 841]
//     detected NVSwitch fatal error 20034 on fid 0 on NVSwitch pci bus id
//     00000000:86:00.0 physical id 3 port 33" (non-fatal ones read
//     "non-fatal error" and do not match);
//   - a GPU NVLink fatal error as newer releases report it: "Fabric Manager
//     detected GPU NVL Fatal error on :" ("... NVL Non Fatal error" does not
//     match);
//   - an NVLink training failure logged at ERROR level; its wording varies
//     between releases, so it is matched loosely, but only on [ERROR] lines.
var DefaultFatalPatterns = []string{
	`detected NVSwitch fatal error`,
	`detected GPU NVL Fatal error`,
	`\[ERROR\].*(?i)nvlink.*train.*fail`,
}

func defaultFabric() Fabric {
	return Fabric{Manager: FabricManager{
		Common:        Common{Enabled: true},
		Process:       "nv-fabricmanager",
		Unit:          "nvidia-fabricmanager.service",
		Log:           "/var/log/fabricmanager.log",
		FatalPatterns: append([]string(nil), DefaultFatalPatterns...),
		MaxRead:       "4MiB",
		NVLSMProcess:  "nvlsm",
	}, SXid: SXid{Common: Common{Enabled: true}}}
}

// Limits on checks.fabric.manager.max_read: below the low one a busy log
// would be skipped over on most runs; above the high one a run could spend
// seconds on a log that grew without bound.
const (
	MinFabricMaxRead = 64 << 10
	MaxFabricMaxRead = 256 << 20
)

// unitName is a systemd service or scope name (systemd.unit(5): ASCII
// letters, digits, ":", "-", "_", ".", "\" and "@" for instances).
var unitName = lazyre.New(`^[A-Za-z0-9:_.\\@-]+\.(service|scope)$`)

func (ps *problems) fabric(c Fabric, deadline time.Duration) {
	m := c.Manager
	ps.timeout("checks.fabric.manager.timeout", m.Timeout.Duration, deadline, true)
	switch {
	case strings.TrimSpace(m.Process) == "":
		ps.add("checks.fabric.manager.process", "must name the Fabric Manager process, e.g. \"nv-fabricmanager\"")
	case strings.ContainsAny(m.Process, "/\x00\n"):
		ps.add("checks.fabric.manager.process", "%q: want a process name, not a path", m.Process)
	}
	if m.Unit != "" && (len(m.Unit) > 255 || !unitName.MatchString(m.Unit)) {
		ps.add("checks.fabric.manager.unit", "%q is not a systemd unit name such as \"nvidia-fabricmanager.service\" (\"\" skips the unit check)", m.Unit)
	}
	if strings.ContainsAny(m.NVLSMProcess, "/\x00\n") || (m.NVLSMProcess != "" && strings.TrimSpace(m.NVLSMProcess) != m.NVLSMProcess) {
		ps.add("checks.fabric.manager.nvlsm_process", "%q: want a process name such as \"nvlsm\" (\"\" does not check it)", m.NVLSMProcess)
	}
	if m.NVLSMUnit != "" && (len(m.NVLSMUnit) > 255 || !unitName.MatchString(m.NVLSMUnit)) {
		ps.add("checks.fabric.manager.nvlsm_unit", "%q is not a systemd unit name such as \"nvidia-fabricmanager.service\" (\"\" skips the unit check)", m.NVLSMUnit)
	}
	ps.absPath("checks.fabric.manager.log", m.Log, true)
	ps.absPath("checks.fabric.manager.rotated_log", m.RotatedLog, true)
	if m.RotatedLog != "" && m.Log != "" && filepath.Clean(m.RotatedLog) == filepath.Clean(m.Log) {
		ps.add("checks.fabric.manager.rotated_log", "must differ from checks.fabric.manager.log")
	}
	for i, p := range m.FatalPatterns {
		key := fmt.Sprintf("checks.fabric.manager.fatal_patterns[%d]", i)
		if strings.TrimSpace(p) == "" {
			ps.add(key, "empty pattern would match every line")
			continue
		}
		if _, err := regexp.Compile(p); err != nil {
			ps.add(key, "%q is not a regular expression: %v", p, err)
		}
	}
	n, err := ParseSize(m.MaxRead)
	switch {
	case err != nil:
		ps.add("checks.fabric.manager.max_read", "%v", err)
	case n < MinFabricMaxRead || n > MaxFabricMaxRead:
		ps.add("checks.fabric.manager.max_read", "%q: want 64KiB to 256MiB", m.MaxRead)
	}
}
