package config

import (
	"slices"
	"testing"
)

// The site's overrides of NVIDIA's XID catalogue, one problem each.
func TestXIDValidation(t *testing.T) {
	ov := func(o ...XIDOverride) func(c *Config) {
		return func(c *Config) { c.Checks.GPU.XID.Override = o }
	}
	tests := []struct {
		name string
		set  func(c *Config)
		key  string // "" when valid
		msg  string
	}{
		{"catalogue alone", func(*Config) {}, "", ""},
		{"override fail", ov(XIDOverride{XID: 13, Status: "fail", Action: "reset-gpu", EscalateAfter: 3}), "", ""},
		{"override fail, catalogue's action", ov(XIDOverride{XID: 13, Status: "fail"}), "", ""},
		{"override ok", ov(XIDOverride{XID: 79, Status: "ok"}), "", ""},
		{"override warn, action none", ov(XIDOverride{XID: 79, Status: "warn", Action: "none"}), "", ""},
		{"override never escalates", ov(XIDOverride{XID: 79, Status: "fail", EscalateAfter: -1}), "", ""},
		{"override status unknown", ov(XIDOverride{XID: 13, Status: "drain"}), "checks.gpu.xid.override.status", `"drain": want one of`},
		{"override status empty", ov(XIDOverride{XID: 13}), "checks.gpu.xid.override.status", "want one of"},
		{"override action unknown", ov(XIDOverride{XID: 13, Status: "fail", Action: "power-cycle"}), "checks.gpu.xid.override.action", `"power-cycle"`},
		{"override action on a warn", ov(XIDOverride{XID: 13, Status: "warn", Action: "reboot"}), "checks.gpu.xid.override.action", "only a \"fail\""},
		{"override xid 0", ov(XIDOverride{XID: 0, Status: "ok"}), "checks.gpu.xid.override.xid", "out of range"},
		{"override xid 1000", ov(XIDOverride{XID: 1000, Status: "ok"}), "checks.gpu.xid.override.xid", "out of range"},
		{"override twice", ov(XIDOverride{XID: 13, Status: "ok"}, XIDOverride{XID: 13, Status: "warn"}), "checks.gpu.xid.override.xid", "override already"},
		{"override and list", func(c *Config) {
			c.Checks.GPU.XID.Drain = []int{13}
			c.Checks.GPU.XID.Override = []XIDOverride{{XID: 13, Status: "warn"}}
		}, "checks.gpu.xid.override.xid", "also in"},
		{"override escalate_after", ov(XIDOverride{XID: 13, Status: "fail", EscalateAfter: -2}), "checks.gpu.xid.override.escalate_after", "-1 (never)"},
		{"escalate_after off", func(c *Config) { c.Checks.GPU.XID.EscalateAfter = 0 }, "", ""},
		{"escalate_after negative", func(c *Config) { c.Checks.GPU.XID.EscalateAfter = -1 }, "checks.gpu.xid.escalate_after", "0 (never)"},
		{"drain list as before", func(c *Config) {
			c.Checks.GPU.XID.Drain = []int{48, 62, 64, 74, 79, 95, 109, 119, 120, 140, 144, 145, 146, 147, 148, 149, 150}
			c.Checks.GPU.XID.Warn = []int{13, 31, 43, 45, 63, 92, 94}
		}, "", ""},
		{"drain and warn", func(c *Config) { c.Checks.GPU.XID.Drain, c.Checks.GPU.XID.Warn = []int{13}, []int{13} }, "checks.gpu.xid.warn", "also in"},
		{"drain twice", func(c *Config) { c.Checks.GPU.XID.Drain = []int{79, 79} }, "checks.gpu.xid.drain", "twice"},
		{"warn out of range", func(c *Config) { c.Checks.GPU.XID.Warn = []int{0} }, "checks.gpu.xid.warn", "out of range"},
		{"recovery timeout", func(c *Config) { c.Checks.GPU.Recovery.Timeout = Duration{-1} }, "checks.gpu.recovery.timeout", "above 0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.set(&c)
			wantValidation(t, c, tt.key, tt.msg)
		})
	}
}

// Problems in [[checks.gpu.xid.override]] point at their lines; a site
// file with the old drain and warn lists still loads.
func TestXIDOverrideLines(t *testing.T) {
	p := writeFile(t, doc(
		`[checks.gpu.xid]`,
		`drain = [79]`,
		`warn = [13]`,
		`[[checks.gpu.xid.override]]`,
		`xid = 31`,
		`status = "fail"`,
		`action = "reset-gpu"`,
		`escalate_after = 3`,
		`[[checks.gpu.xid.override]]`,
		`xid = 31`,
		`status = "sometimes"`,
	))
	_, err := Load(p, "n1")
	if err == nil {
		t.Fatal("Load succeeded")
	}
	want := []string{"10 checks.gpu.xid.override.xid", "11 checks.gpu.xid.override.status"}
	if got := found(t, err, p); !slices.Equal(got, want) {
		t.Errorf("got %q, want %q\n%v", got, want, err)
	}

	p = writeFile(t, doc(`[checks.gpu.xid]`, `drain = [79, 145]`, `warn = [13, 45]`))
	c, err := Load(p, "n1")
	if err != nil {
		t.Fatal(err)
	}
	if x := c.Checks.GPU.XID; !slices.Equal(x.Drain, []int{79, 145}) || !slices.Equal(x.Warn, []int{13, 45}) || x.EscalateAfter != DefaultXIDEscalateAfter {
		t.Errorf("old-style lists: %+v", x)
	}
}
