package config

import (
	"strings"
	"testing"
	"time"
)

func TestValidateJob(t *testing.T) {
	sec := func(n int) Duration { return Duration{time.Duration(n) * time.Second} }
	tests := []struct {
		name string
		set  func(c *Config)
		key  string // "" when the change is valid
		msg  string
	}{
		{"no prolog checks", func(c *Config) { c.Prolog.Checks = nil }, "", ""},
		{"every known check", func(c *Config) { c.Prolog.Checks = KnownChecks() }, "", ""},
		{"unknown check names the known ones", func(c *Config) { c.Prolog.Checks = []string{"gpu.count", "gpu.ecc"} },
			"prolog.checks", `"gpu.ecc" is not a check; known: bandwidth, fabric.manager, fabric.sxid, gpu.config`},
		{"check listed twice", func(c *Config) { c.Epilog.Checks = []string{"gpu.xid", "gpu.xid"} }, "epilog.checks", "listed twice"},
		{"unknown full check", func(c *Config) { c.Prolog.FullChecks = []string{"nccl"} }, "prolog.full_checks", "not a check"},
		{"the epilog's own check is not configurable", func(c *Config) { c.Epilog.Checks = []string{"job.leftover"} }, "epilog.checks", "not a check"},
		{"full partitions", func(c *Config) { c.Prolog.FullPartitions = []string{"gpu-debug", "acceptance"} }, "", ""},
		{"partition with a comma", func(c *Config) { c.Prolog.FullPartitions = []string{"a,b"} }, "prolog.full_partitions", "not a partition"},
		{"empty partition", func(c *Config) { c.Prolog.FullPartitions = []string{""} }, "prolog.full_partitions", "not a partition"},
		{"prolog budget zero", func(c *Config) { c.Prolog.Budget = sec(0) }, "prolog.budget", "above 0s"},
		{"prolog budget 46s", func(c *Config) { c.Prolog.Budget = sec(46) }, "prolog.budget", "longer than"},
		{"full budget 10m", func(c *Config) { c.Prolog.FullBudget = sec(600) }, "", ""},
		{"full budget 11m", func(c *Config) { c.Prolog.FullBudget = sec(660) }, "prolog.full_budget", "longer than"},
		{"lock wait zero", func(c *Config) { c.Prolog.LockWait = sec(0) }, "", ""},
		{"lock wait as long as the budget", func(c *Config) { c.Prolog.LockWait = c.Prolog.Budget }, "prolog.lock_wait", "below the budget"},
		{"epilog lock wait negative", func(c *Config) { c.Epilog.LockWait = sec(-1) }, "epilog.lock_wait", "0s or more"},
		{"max job records zero", func(c *Config) { c.Prolog.MaxJobRecords = 0 }, "prolog.max_job_records", "at least 1"},
		{"leftover kill", func(c *Config) { c.Epilog.Leftover = "kill" }, "", ""},
		{"leftover off", func(c *Config) { c.Epilog.Leftover = "off" }, "", ""},
		{"leftover typo", func(c *Config) { c.Epilog.Leftover = "kil" }, "epilog.leftover", `"kil": want one of`},
		{"memory threshold off", func(c *Config) { c.Epilog.LeftoverMemoryMiB = 0 }, "", ""},
		{"memory threshold negative", func(c *Config) { c.Epilog.LeftoverMemoryMiB = -1 }, "epilog.leftover_memory_mib", "negative"},
		{"kill grace beyond the budget", func(c *Config) { c.Epilog.KillGrace = sec(10) }, "epilog.kill_grace", "below the budget"},
		{"fail exit 0", func(c *Config) { c.Epilog.FailExit = 0 }, "", ""},
		{"fail exit 2", func(c *Config) { c.Epilog.FailExit = 2 }, "epilog.fail_exit", "want 0 or 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.set(&c)
			wantValidation(t, c, tt.key, tt.msg)
		})
	}
}

func TestJobConfigFromTOML(t *testing.T) {
	doc := `
[prolog]
checks = ["gpu.count", "ib.port"]
full_partitions = ["acceptance"]
[epilog]
leftover = "kill"
fail_exit = 0
`
	c, err := Parse("gpuhc.toml", []byte(doc), "gpu001")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.Prolog.Checks, ",") != "gpu.count,ib.port" || c.Prolog.FullPartitions[0] != "acceptance" ||
		c.Epilog.Leftover != LeftoverKill || c.Epilog.FailExit != 0 || c.Prolog.Budget.Duration != 5*time.Second {
		t.Errorf("parsed %+v %+v", c.Prolog, c.Epilog)
	}
	_, err = Parse("gpuhc.toml", []byte("[prolog]\nchecks = [\"gpu.cuont\"]\n"), "gpu001")
	if err == nil || !strings.Contains(err.Error(), `gpuhc.toml:2: prolog.checks[0]: "gpu.cuont" is not a check`) {
		t.Errorf("typo in a check name: %v", err)
	}
}
