package config

import (
	"strings"
	"testing"
)

func TestValidateKernel(t *testing.T) {
	over := func(rule, status, action string) func(c *Config) {
		return func(c *Config) {
			c.Checks.Kernel.Override = append(c.Checks.Kernel.Override, KernelOverride{Rule: rule, Status: status, Action: action})
		}
	}
	sx := func(code int, status, action string) func(c *Config) {
		return func(c *Config) {
			c.Checks.Fabric.SXid.Override = append(c.Checks.Fabric.SXid.Override, SXidOverride{Code: code, Status: status, Action: action})
		}
	}
	tests := []struct {
		name string
		set  func(c *Config)
		key  string
		msg  string
	}{
		{"disable known", func(c *Config) { c.Checks.Kernel.Disable = []string{"hung_task", "nvme_timeout"} }, "", ""},
		{"disable unknown", func(c *Config) { c.Checks.Kernel.Disable = []string{"hung_tasks"} }, "checks.kernel.disable", `"hung_tasks" is not a rule`},
		{"override to warn", over("soft_lockup", "warn", "none"), "", ""},
		{"override status only", over("soft_lockup", "WARN", ""), "", ""},
		{"override action only", over("aer_fatal", "", "drain"), "", ""},
		{"override silence", over("hung_task", "ok", ""), "", ""},
		{"override unknown rule", over("softlockup", "warn", ""), "checks.kernel.override.rule", "not a rule"},
		{"override twice", func(c *Config) { over("io_error", "warn", "")(c); over("io_error", "fail", "drain")(c) }, "checks.kernel.override.rule", "overridden twice"},
		{"override empty", over("io_error", "", ""), "checks.kernel.override", "neither status nor action"},
		{"override bad status", over("io_error", "error", ""), "checks.kernel.override.status", "want ok, warn or fail"},
		{"override bad action", over("io_error", "fail", "powercycle"), "checks.kernel.override.action", "want one of"},
		{"override fail without action", over("hung_task", "fail", "none"), "checks.kernel.override.action", "other than none"},
		{"kernel timeout over deadline", func(c *Config) { c.Checks.Kernel.Timeout = Duration{c.Deadline.Duration * 2} }, "checks.kernel.timeout", "deadline"},
		{"sxid override", sx(12028, "fail", "reset-gpu"), "", ""},
		{"sxid code 0", sx(0, "warn", ""), "checks.fabric.sxid.override.code", "want an SXid code"},
		{"sxid code twice", func(c *Config) { sx(20034, "warn", "")(c); sx(20034, "ok", "")(c) }, "checks.fabric.sxid.override.code", "overridden twice"},
		{"sxid bad status", sx(20034, "drain", ""), "checks.fabric.sxid.override.status", "want ok"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.set(&c)
			wantValidation(t, c, tt.key, tt.msg)
		})
	}
}

// The sections load from TOML, strictly, and a host section's override
// replaces the base list.
func TestLoadKernel(t *testing.T) {
	const file = `
[checks.kernel]
disable = ["hung_task"]
[[checks.kernel.override]]
rule = "soft_lockup"
status = "warn"
action = "none"

[checks.fabric.sxid]
[[checks.fabric.sxid.override]]
code = 12028
status = "fail"
action = "reset-gpu"
`
	c, err := Parse("gpuhc.toml", []byte(file), "gpu001")
	if err != nil {
		t.Fatal(err)
	}
	k := c.Checks.Kernel
	if !k.Enabled || len(k.Disable) != 1 || k.Disable[0] != "hung_task" || len(k.Override) != 1 || k.Override[0] != (KernelOverride{"soft_lockup", "warn", "none"}) {
		t.Errorf("checks.kernel = %+v", k)
	}
	s := c.Checks.Fabric.SXid
	if !s.Enabled || len(s.Override) != 1 || s.Override[0] != (SXidOverride{12028, "fail", "reset-gpu"}) {
		t.Errorf("checks.fabric.sxid = %+v", s)
	}
	_, err = Parse("gpuhc.toml", []byte("[[checks.kernel.override]]\nrule = \"soft_lockup\"\nstat = \"warn\"\n"), "gpu001")
	if err == nil || !strings.Contains(err.Error(), "gpuhc.toml:3") {
		t.Errorf("unknown key: got %v, want an error at gpuhc.toml:3", err)
	}
}

// A [[host]] section changes the rules for the hosts it matches only.
func TestKernelPerHost(t *testing.T) {
	const file = `
[[host]]
match = "gpu[001-004]"
[host.checks.kernel]
disable = ["io_error"]
[[host.checks.kernel.override]]
rule = "hung_task"
status = "ok"
`
	c, err := Parse("gpuhc.toml", []byte(file), "gpu002")
	if err != nil {
		t.Fatal(err)
	}
	if k := c.Checks.Kernel; len(k.Disable) != 1 || k.Disable[0] != "io_error" || len(k.Override) != 1 || k.Override[0].Rule != "hung_task" {
		t.Errorf("gpu002: %+v", k)
	}
	c, err = Parse("gpuhc.toml", []byte(file), "gpu005")
	if err != nil {
		t.Fatal(err)
	}
	if k := c.Checks.Kernel; len(k.Disable) != 0 || len(k.Override) != 0 {
		t.Errorf("gpu005: %+v", k)
	}
}
