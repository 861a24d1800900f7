package config

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestDefaultIsValid(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestValidate(t *testing.T) {
	sec := func(n int) Duration { return Duration{time.Duration(n) * time.Second} }
	tests := []struct {
		name string
		set  func(c *Config)
		key  string // "" when the change is valid
		msg  string // part of the message
	}{
		{"root relative", func(c *Config) { c.Root = "fixtures" }, "root", "absolute"},
		{"thermal cpu warn above cpu fail", func(c *Config) { c.Checks.Thermal.CPUWarnCelsius = 101 }, "checks.thermal.cpu_warn_celsius", "above cpu_fail_celsius (100)"},
		{"thermal cpu fail 0 takes fail_celsius", func(c *Config) { c.Checks.Thermal.CPUFailCelsius = 0 }, "", ""},
		{"thermal cpu warn above general fail", func(c *Config) { c.Checks.Thermal.CPUFailCelsius, c.Checks.Thermal.CPUWarnCelsius = 0, 96 }, "checks.thermal.cpu_warn_celsius", "above cpu_fail_celsius (95)"},
		{"thermal hca negative", func(c *Config) { c.Checks.Thermal.HCAWarnCelsius = -1 }, "checks.thermal.hca_warn_celsius", "want 0"},
		{"thermal hca NaN", func(c *Config) { c.Checks.Thermal.HCAFailCelsius = math.NaN() }, "checks.thermal.hca_fail_celsius", "want 0"},
		{"thermal hca over 200", func(c *Config) { c.Checks.Thermal.HCAFailCelsius = 250 }, "checks.thermal.hca_fail_celsius", "to 200"},
		{"thermal fail over 200", func(c *Config) { c.Checks.Thermal.FailCelsius = 250 }, "checks.thermal.fail_celsius", "at most 200"},
		{"thermal fail NaN", func(c *Config) { c.Checks.Thermal.FailCelsius = math.NaN() }, "checks.thermal.fail_celsius", "above 0"},
		{"state_dir empty", func(c *Config) { c.StateDir = "" }, "state_dir", "absolute"},
		{"state_dir relative", func(c *Config) { c.StateDir = "var/lib" }, "state_dir", "absolute"},
		{"lock_file relative", func(c *Config) { c.LockFile = "x.lock" }, "lock_file", "absolute"},
		{"deadline zero", func(c *Config) { c.Deadline = sec(0) }, "deadline", "above 0s"},
		{"deadline negative", func(c *Config) { c.Deadline = sec(-1) }, "deadline", "above 0s"},
		{"deadline 45s", func(c *Config) { c.Deadline = sec(45) }, "", ""},
		{"deadline 46s", func(c *Config) { c.Deadline = sec(46) }, "deadline", "slurmd kills"},
		{"slurm user empty", func(c *Config) { c.Slurm.User = "" }, "slurm.user", "must name"},
		{"slurm url with credentials", func(c *Config) { c.Slurm.URL = "http://u:p@h:1" }, "slurm.url", "credentials"},
		{"slurm url with query", func(c *Config) { c.Slurm.URL = "http://h:1/?x=1" }, "slurm.url", "query"},
		{"check_timeout zero", func(c *Config) { c.CheckTimeout = sec(0) }, "check_timeout", "above 0s"},
		{"check_timeout = deadline", func(c *Config) { c.CheckTimeout = c.Deadline }, "", ""},
		{"check_timeout over deadline", func(c *Config) { c.CheckTimeout = sec(46) }, "check_timeout", "longer than the deadline"},
		{"check timeout zero inherits", func(c *Config) { c.Checks.CPU.Timeout = sec(0) }, "", ""},
		{"check timeout negative", func(c *Config) { c.Checks.Memory.Timeout = sec(-1) }, "checks.memory.timeout", "above 0s"},
		{"check timeout over deadline", func(c *Config) { c.Checks.Thermal.Timeout = sec(50) }, "checks.thermal.timeout", "deadline"},
		{"log level", func(c *Config) { c.Log.Level = "verbose" }, "log.level", "not a level"},
		{"log level warning", func(c *Config) { c.Log.Level = "warning" }, "", ""},
		{"log file relative", func(c *Config) { c.Log.File = "gpuhc.log" }, "log.file", "absolute"},
		{"syslog on", func(c *Config) { c.Log.Syslog = true }, "", ""},
		{"syslog facility local7", func(c *Config) { c.Log.SyslogFacility = "local7" }, "", ""},
		{"syslog facility user", func(c *Config) { c.Log.SyslogFacility = "user" }, "", ""},
		{"syslog facility local8", func(c *Config) { c.Log.SyslogFacility = "local8" }, "log.syslog_facility", "want user, daemon or local0 to local7"},
		{"syslog facility kern", func(c *Config) { c.Log.SyslogFacility = "kern" }, "log.syslog_facility", "not a facility"},
		{"syslog facility upper case", func(c *Config) { c.Log.SyslogFacility = "DAEMON" }, "log.syslog_facility", "not a facility"},
		{"syslog facility empty", func(c *Config) { c.Log.SyslogFacility = "" }, "log.syslog_facility", "not a facility"},
		{"syslog tag", func(c *Config) { c.Log.SyslogTag = "gpuhc_hc-2.1" }, "", ""},
		{"syslog tag 32", func(c *Config) { c.Log.SyslogTag = strings.Repeat("g", 32) }, "", ""},
		{"syslog tag 33", func(c *Config) { c.Log.SyslogTag = strings.Repeat("g", 33) }, "log.syslog_tag", "over 32"},
		{"syslog tag space", func(c *Config) { c.Log.SyslogTag = "gpu hc" }, "log.syslog_tag", "letters, digits"},
		{"syslog tag colon", func(c *Config) { c.Log.SyslogTag = "gpuhc:" }, "log.syslog_tag", "letters, digits"},
		{"syslog tag control", func(c *Config) { c.Log.SyslogTag = "gpuhc\n" }, "log.syslog_tag", "letters, digits"},
		{"syslog socket relative", func(c *Config) { c.Log.SyslogSocket = "dev/log" }, "log.syslog_socket", "absolute"},
		{"syslog socket empty", func(c *Config) { c.Log.SyslogSocket = "" }, "log.syslog_socket", "absolute"},
		{"events file empty", func(c *Config) { c.Events.File = "" }, "", ""},
		{"events file relative", func(c *Config) { c.Events.File = "ev.jsonl" }, "events.file", "absolute"},
		{"heartbeat 1h", func(c *Config) { c.Events.Heartbeat = sec(3600) }, "", ""},
		{"heartbeat under 1h", func(c *Config) { c.Events.Heartbeat = sec(3599) }, "events.heartbeat", "at least 1h"},
		{"heartbeat zero", func(c *Config) { c.Events.Heartbeat = sec(0) }, "events.heartbeat", "at least 1h"},
		{"metrics off", func(c *Config) { c.Metrics.TextfileDir = "" }, "", ""},
		{"metrics dir", func(c *Config) { c.Metrics.TextfileDir = "/var/lib/node_exporter/textfile" }, "", ""},
		{"metrics dir relative", func(c *Config) { c.Metrics.TextfileDir = "textfile" }, "metrics.textfile_dir", "absolute"},
		{"resume_after zero", func(c *Config) { c.Policy.ResumeAfter = 0 }, "policy.resume_after", "at least 1"},
		{"resume_after one", func(c *Config) { c.Policy.ResumeAfter = 1 }, "", ""},
		{"max_drained_fraction off", func(c *Config) { c.Policy.MaxDrainedFraction = 0 }, "", ""},
		{"max_drained_fraction all", func(c *Config) { c.Policy.MaxDrainedFraction = 1 }, "", ""},
		{"max_drained_fraction as percent", func(c *Config) { c.Policy.MaxDrainedFraction = 10 }, "policy.max_drained_fraction", "between 0 and 1 (0.10 is 10%"},
		{"max_drained_fraction negative", func(c *Config) { c.Policy.MaxDrainedFraction = -0.1 }, "policy.max_drained_fraction", "between 0 and 1"},
		{"max_drained_fraction NaN", func(c *Config) { c.Policy.MaxDrainedFraction = math.NaN() }, "policy.max_drained_fraction", "between 0 and 1"},
		{"max_drained_nodes", func(c *Config) { c.Policy.MaxDrainedNodes = 5 }, "", ""},
		{"max_drained_nodes negative", func(c *Config) { c.Policy.MaxDrainedNodes = -1 }, "policy.max_drained_nodes", "negative"},
		{"storm_cache off", func(c *Config) { c.Policy.StormCache = sec(0) }, "", ""},
		{"storm_cache negative", func(c *Config) { c.Policy.StormCache = sec(-1) }, "policy.storm_cache", "negative"},
		{"backend unknown", func(c *Config) { c.Slurm.Backend = "sacctmgr" }, "slurm.backend", "auto, rest or scontrol"},
		{"backend scontrol", func(c *Config) { c.Slurm.Backend = "scontrol" }, "", ""},
		{"backend rest without url", func(c *Config) { c.Slurm.Backend = "rest" }, "slurm.backend", "needs slurm.url"},
		{"backend rest with url", func(c *Config) { c.Slurm.Backend, c.Slurm.URL = "rest", "http://ctl:6820" }, "", ""},
		{"scontrol relative", func(c *Config) { c.Slurm.Scontrol = "scontrol" }, "slurm.scontrol", "absolute"},
		{"token_file relative", func(c *Config) { c.Slurm.TokenFile = "token" }, "slurm.token_file", "absolute"},
		{"url https", func(c *Config) { c.Slurm.URL = "https://ctl.example:6820" }, "", ""},
		{"url unix", func(c *Config) { c.Slurm.URL = "unix:/run/slurmrestd.sock" }, "", ""},
		{"url unix relative", func(c *Config) { c.Slurm.URL = "unix:run/x.sock" }, "slurm.url", "unix:/absolute/path"},
		{"url unix//", func(c *Config) { c.Slurm.URL = "unix:///run/x.sock" }, "slurm.url", "unix:/absolute/path"},
		{"url ftp", func(c *Config) { c.Slurm.URL = "ftp://ctl" }, "slurm.url", "want http"},
		{"url without host", func(c *Config) { c.Slurm.URL = "http://" }, "slurm.url", "want http"},
		{"url bare host", func(c *Config) { c.Slurm.URL = "ctl:6820" }, "slurm.url", "want http"},
		{"slurm timeout zero", func(c *Config) { c.Slurm.Timeout = sec(0) }, "slurm.timeout", "above 0s"},
		{"slurm timeout over deadline", func(c *Config) { c.Slurm.Timeout = sec(50) }, "slurm.timeout", "deadline"},
		{"retries negative", func(c *Config) { c.Slurm.Retries = -1 }, "slurm.retries", "negative"},
		{"retries zero", func(c *Config) { c.Slurm.Retries = 0 }, "", ""},
		{"thermal warn above fail", func(c *Config) { c.Checks.Thermal.WarnCelsius = 96 }, "checks.thermal.warn_celsius", "above fail_celsius"},
		{"thermal warn equals fail", func(c *Config) { c.Checks.Thermal.WarnCelsius = 95 }, "", ""},
		{"thermal fail zero", func(c *Config) { c.Checks.Thermal.FailCelsius = 0 }, "checks.thermal.fail_celsius", "above 0"},
		{"thermal warn zero", func(c *Config) { c.Checks.Thermal.WarnCelsius = 0 }, "checks.thermal.warn_celsius", "above 0"},
		{"thermal exclude glob", func(c *Config) { c.Checks.Thermal.Exclude = []string{"acpitz", "iwl*"} }, "", ""},
		{"thermal exclude bad glob", func(c *Config) { c.Checks.Thermal.Exclude = []string{"acpi["} }, "checks.thermal.exclude", "glob"},
		{"module name", func(c *Config) { c.Checks.Modules.Required = []string{"nvidia", "nvidia peermem"} }, "checks.modules.required", "not a name"},
		{"process name empty", func(c *Config) { c.Checks.Processes.Required = []string{""} }, "checks.processes.required", "not a name"},
		{"process names", func(c *Config) { c.Checks.Processes.Required = []string{"nv-fabricmanager"} }, "", ""},
		{"mount ok", func(c *Config) { c.Checks.Mounts.Mount = []Mount{{Path: "/scratch", MinFree: "5%"}} }, "", ""},
		{"mount relative", func(c *Config) { c.Checks.Mounts.Mount = []Mount{{Path: "scratch"}} }, "checks.mounts.mount.path", "absolute"},
		{"mount missing path", func(c *Config) { c.Checks.Mounts.Mount = []Mount{{FSType: "nfs"}} }, "checks.mounts.mount.path", "absolute"},
		{"mount unclean", func(c *Config) { c.Checks.Mounts.Mount = []Mount{{Path: "/scratch/"}} }, "checks.mounts.mount.path", `as "/scratch"`},
		{"mount twice", func(c *Config) { c.Checks.Mounts.Mount = []Mount{{Path: "/a"}, {Path: "/a"}} }, "checks.mounts.mount.path", "twice"},
		{"mount min_free", func(c *Config) { c.Checks.Mounts.Mount = []Mount{{Path: "/a", MinFree: "lots"}} }, "checks.mounts.mount.min_free", "bad size"},
		{"mount min_free percent", func(c *Config) { c.Checks.Mounts.Mount = []Mount{{Path: "/a", MinFree: "120%"}} }, "checks.mounts.mount.min_free", "percentage"},
		{"mount fstype", func(c *Config) { c.Checks.Mounts.Mount = []Mount{{Path: "/a", FSType: "nfs 4"}} }, "checks.mounts.mount.fstype", "filesystem type"},
		{"min_total", func(c *Config) { c.Checks.Memory.MinTotal = "1000GiB" }, "", ""},
		{"min_total bad", func(c *Config) { c.Checks.Memory.MinTotal = "1000 gigs" }, "checks.memory.min_total", "bad size"},
		{"cpu expected negative", func(c *Config) { c.Checks.CPU.Expected = -1 }, "checks.cpu.expected", "negative"},
		{"cpu expected", func(c *Config) { c.Checks.CPU.Expected = 192 }, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.set(&c)
			wantValidation(t, c, tt.key, tt.msg)
		})
	}
}

// Validation problems point at the line that set the value; a default
// that became invalid has no line.
func TestValidationLines(t *testing.T) {
	p := writeFile(t, doc(
		`deadline = "5s"`, // check_timeout's default 10s is now too long
		`[slurm]`,
		`backend = "rest"`,
		`[[checks.mounts.mount]]`,
		`path = "/a"`,
		`[[checks.mounts.mount]]`,
		`path = "/b"`,
		`min_free = "x"`,
		`[[host]]`,
		`match = "n1"`,
		`[[host.checks.mounts.mount]]`,
		`fstype = "nfs"`,
		`[host.policy]`,
		`resume_after = 0`,
	))
	_, err := Load(p, "n1")
	if err == nil {
		t.Fatal("Load succeeded")
	}
	want := []string{
		"3 slurm.backend",
		"8 checks.mounts.mount.min_free",
		"11 checks.mounts.mount.path", // the host's entry has no path: its header
		"14 policy.resume_after",
		"0 check_timeout",
	}
	if got := found(t, err, p); !slices.Equal(got, want) {
		t.Errorf("got %q, want %q\n%v", got, want, err)
	}
}

func TestEventsAndMetricsDefaults(t *testing.T) {
	c := Default()
	if c.Events.Heartbeat.Duration != 24*time.Hour || c.Metrics.TextfileDir != "" {
		t.Errorf("defaults: heartbeat %s, metrics.textfile_dir %q", c.Events.Heartbeat.Duration, c.Metrics.TextfileDir)
	}
}

func TestStormGuardDefaults(t *testing.T) {
	p := Default().Policy
	if p.MaxDrainedFraction != 0.10 || p.MaxDrainedNodes != 0 || p.StormCache.Duration != 60*time.Second {
		t.Errorf("storm guard defaults: %+v", p)
	}
}

// wantValidation checks c.Validate(): no error when key is "", else exactly
// one error, for key, whose message contains msg and which carries no file
// or line (Validate knows none).
func wantValidation(t *testing.T, c Config, key, msg string) {
	t.Helper()
	err := c.Validate()
	if key == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 1 {
		t.Fatalf("want one error for %s, got %v", key, err)
	}
	if e := list[0]; e.Key != key || !strings.Contains(e.Msg, msg) || e.Line != 0 || e.File != "" {
		t.Errorf("got %+v, want key %q and message containing %q", e, key, msg)
	}
}

// The [log] syslog keys load from a file, and a bad facility or tag is
// refused there with the key named.
func TestSyslogKeysLoad(t *testing.T) {
	good := "[log]\nsyslog = true\nsyslog_facility = \"local5\"\nsyslog_tag = \"hc\"\nsyslog_socket = \"/run/systemd/journal/syslog\"\n"
	c, err := Parse("good.toml", []byte(good), "gpu001")
	if err != nil {
		t.Fatal(err)
	}
	if l := c.Log; !l.Syslog || l.SyslogFacility != "local5" || l.SyslogTag != "hc" || l.SyslogSocket != "/run/systemd/journal/syslog" {
		t.Errorf("loaded %+v", l)
	}
	for _, tc := range []struct{ body, want string }{
		{"[log]\nsyslog_facility = \"kern\"\n", "log.syslog_facility"},
		{"[log]\nsyslog_tag = \"gpu hc\"\n", "log.syslog_tag"},
		{"[log]\nsyslog_socket = \"log.sock\"\n", "log.syslog_socket"},
		{"[log]\nsyslog_facilty = \"daemon\"\n", "syslog_facilty"},
	} {
		if _, err := Parse("bad.toml", []byte(tc.body), "gpu001"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error naming %s", tc.body, err, tc.want)
		}
	}
}
