package config

import (
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
)

// MaxDeadline is the largest check deadline accepted: slurmd kills the
// health check program at 60 s, and a drain after a hung check still needs
// time for a slow slurmrestd and then scontrol.
const MaxDeadline = 45 * time.Second

// NodeVar in a path setting is replaced by the node name, so that several
// simulated slurmd nodes on one host keep separate state.
const NodeVar = "%n"

// Validate checks a configuration's values. Load already calls it; use it
// for a Config built in code. Its errors carry keys but no lines.
func (c Config) Validate() error {
	var l ErrorList
	for _, p := range validate(c) {
		l = append(l, &Error{Key: plainKey(p.path), Msg: p.msg})
	}
	return l.errOrNil()
}

// problem is one invalid value; path may carry array indices.
type problem struct{ path, msg string }

type problems []problem

func (ps *problems) add(path, format string, args ...any) {
	*ps = append(*ps, problem{path, path + ": " + fmt.Sprintf(format, capArgs(args)...)})
}

// expandNode replaces %n in the path settings that must differ between
// nodes sharing one host.
func expandNode(c *Config, node string) []problem {
	var ps problems
	for _, f := range []struct {
		path string
		v    *string
	}{
		{"state_dir", &c.StateDir}, {"lock_file", &c.LockFile},
		{"events.file", &c.Events.File}, {"log.file", &c.Log.File},
		{"metrics.textfile_dir", &c.Metrics.TextfileDir},
	} {
		if !strings.Contains(*f.v, NodeVar) {
			continue
		}
		if node == "" || strings.ContainsAny(node, "/\x00") || node == "." || node == ".." {
			ps.add(f.path, "uses %s but the node name %q cannot be part of a path", NodeVar, node)
			continue
		}
		*f.v = strings.ReplaceAll(*f.v, NodeVar, node)
	}
	return ps
}

func validate(c Config) []problem {
	var ps problems
	ps.absPath("root", c.Root, false)
	ps.absPath("state_dir", c.StateDir, false)
	ps.absPath("lock_file", c.LockFile, false)
	ps.deadline(c.Deadline.Duration)
	ps.timeout("check_timeout", c.CheckTimeout.Duration, c.Deadline.Duration, false)
	ps.log(c.Log, c.Events)
	ps.absPath("metrics.textfile_dir", c.Metrics.TextfileDir, true)
	ps.policy(c.Policy)
	ps.slurm(c.Slurm, c.Deadline.Duration)
	ps.checks(c.Checks, c.Deadline.Duration)
	ps.prolog(c.Prolog)
	ps.epilog(c.Epilog)
	ps.remediate(c.Remediate, c.Deadline.Duration)
	return ps
}

func (ps *problems) policy(p Policy) {
	if p.ResumeAfter < 1 {
		ps.add("policy.resume_after", "must be at least 1, got %d", p.ResumeAfter)
	}
	// !(f >= 0 && f <= 1) also refuses NaN.
	if f := p.MaxDrainedFraction; !(f >= 0 && f <= 1) {
		ps.add("policy.max_drained_fraction", "must be between 0 and 1 (0.10 is 10%%; 0 turns this limit off), got %v", f)
	}
	if p.MaxDrainedNodes < 0 {
		ps.add("policy.max_drained_nodes", "must not be negative (0 turns this limit off), got %d", p.MaxDrainedNodes)
	}
	if d := p.StormJitter.Duration; d < 0 || d > 20*time.Second {
		ps.add("policy.storm_jitter", "want 0s to 20s (it comes out of the run's time), got %s", d)
	}
	if p.StormCache.Duration < 0 {
		ps.add("policy.storm_cache", "must not be negative (0s turns the cache off), got %s", p.StormCache.Duration)
	}
}

func (ps *problems) absPath(key, v string, optional bool) {
	switch {
	case v == "" && optional:
	case v == "":
		ps.add(key, "must be set to an absolute path")
	case !filepath.IsAbs(v):
		ps.add(key, "must be an absolute path, got %q", v)
	}
}

func (ps *problems) deadline(d time.Duration) {
	switch {
	case d <= 0:
		ps.add("deadline", "must be above 0s, got %s", d)
	case d > MaxDeadline:
		ps.add("deadline", "%s is over %s: slurmd kills the health check at 60s", d, MaxDeadline)
	}
}

// timeout checks a limit that must fit in the run's deadline; zero means
// "inherit" where allowed.
func (ps *problems) timeout(key string, d, deadline time.Duration, zeroOK bool) {
	switch {
	case d < 0 || (d == 0 && !zeroOK):
		ps.add(key, "must be above 0s, got %s", d)
	case d > deadline && deadline > 0:
		ps.add(key, "%s is longer than the deadline (%s)", d, deadline)
	}
}

func (ps *problems) log(l Log, e Events) {
	if _, err := logrus.ParseLevel(l.Level); err != nil {
		ps.add("log.level", "%q is not a level: want debug, info, warn or error", l.Level)
	}
	ps.absPath("log.file", l.File, true)
	if _, ok := SyslogFacilityCode(l.SyslogFacility); !ok {
		ps.add("log.syslog_facility", "%q is not a facility: want user, daemon or local0 to local7", l.SyslogFacility)
	}
	if msg := syslogTagProblem(l.SyslogTag); msg != "" {
		ps.add("log.syslog_tag", "%s", msg)
	}
	ps.absPath("log.syslog_socket", l.SyslogSocket, false)
	ps.absPath("events.file", e.File, true)
	if e.Heartbeat.Duration < MinHeartbeat {
		ps.add("events.heartbeat", "must be at least 1h (heartbeats count operating hours), got %s", e.Heartbeat.Duration)
	}
}

// syslogTagProblem says what is wrong with a tag, or "". Syslog daemons
// end the tag at a space, ':' or '[', and RFC 3164 caps it at 32
// characters; letters, digits and "._-" survive every parser.
func syslogTagProblem(tag string) string {
	if len(tag) > MaxSyslogTag {
		return fmt.Sprintf("%d characters is over %d", len(tag), MaxSyslogTag)
	}
	for _, r := range tag {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Sprintf("%q: want letters, digits, '.', '_' and '-' only (\"\" for the program's name)", tag)
		}
	}
	return ""
}

func (ps *problems) slurm(s Slurm, deadline time.Duration) {
	switch s.Backend {
	case "auto", "scontrol":
	case "rest":
		if s.URL == "" {
			ps.add("slurm.backend", `"rest" needs slurm.url`)
		}
	default:
		ps.add("slurm.backend", "%q: want auto, rest or scontrol", s.Backend)
	}
	if strings.TrimSpace(s.User) == "" {
		ps.add("slurm.user", "must name the Slurm user the token belongs to")
	}
	ps.absPath("slurm.scontrol", s.Scontrol, false)
	ps.absPath("slurm.token_file", s.TokenFile, true)
	if msg := checkURL(s.URL); msg != "" {
		ps.add("slurm.url", "%s", msg)
	}
	ps.timeout("slurm.timeout", s.Timeout.Duration, deadline, false)
	if d := s.HealthCheckTimeout.Duration; d < 0 || d > MaxHealthCheckTimeout || d%time.Second != 0 {
		ps.add("slurm.health_check_timeout", "want whole seconds from 1s to %s (0s: read slurm.conf), got %s", MaxHealthCheckTimeout, d)
	}
	if s.Retries < 0 {
		ps.add("slurm.retries", "must not be negative, got %d", s.Retries)
	}
}

// checkURL accepts what the REST client can dial: http(s)://host[:port] or
// unix:/absolute/socket.
func checkURL(s string) string {
	if s == "" {
		return ""
	}
	if sock, ok := strings.CutPrefix(s, "unix:"); ok {
		if !path.IsAbs(sock) || strings.HasPrefix(sock, "//") {
			return fmt.Sprintf("%q: write a socket as unix:/absolute/path", s)
		}
		return ""
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Sprintf("%q: want http://host:port, https://host:port or unix:/path", s)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		// Credentials belong in token_file, never in a URL that gets logged.
		return fmt.Sprintf("%q: credentials, query or fragment not allowed", u.Redacted())
	}
	return ""
}

func (ps *problems) checks(c Checks, deadline time.Duration) {
	for _, s := range []struct {
		name string
		c    Common
	}{
		{"thermal", c.Thermal.Common}, {"modules", c.Modules.Common}, {"processes", c.Processes.Common},
		{"mounts", c.Mounts.Common}, {"memory", c.Memory.Common}, {"cpu", c.CPU.Common},
	} {
		ps.timeout("checks."+s.name+".timeout", s.c.Timeout.Duration, deadline, true)
	}
	ps.thermal(c.Thermal)
	ps.names("checks.modules.required", c.Modules.Required)
	ps.names("checks.processes.required", c.Processes.Required)
	ps.mounts(c.Mounts.Mount)
	if c.Memory.MinTotal != "" {
		if _, err := ParseSize(c.Memory.MinTotal); err != nil {
			ps.add("checks.memory.min_total", "%v", err)
		}
	}
	if c.CPU.Expected < 0 {
		ps.add("checks.cpu.expected", "must not be negative, got %d", c.CPU.Expected)
	}
	ps.gpu(c.GPU, deadline)
	ps.ib(c.IB, deadline)
	ps.fabric(c.Fabric, deadline)
	ps.topology(c.Topology, deadline)
	ps.bandwidth(c.Bandwidth, deadline)
	ps.kernel(c.Kernel, c.Fabric.SXid, deadline)
}

func (ps *problems) thermal(t Thermal) {
	// Readings above 200 °C are taken for broken sensors, so a limit
	// above that could never trip. The negated comparisons also catch
	// TOML's nan.
	const maxC = 200
	if !(t.FailCelsius > 0 && t.FailCelsius <= maxC) {
		ps.add("checks.thermal.fail_celsius", "must be above 0 and at most %d, got %v", maxC, t.FailCelsius)
	}
	if !(t.WarnCelsius > 0 && t.WarnCelsius <= maxC) {
		ps.add("checks.thermal.warn_celsius", "must be above 0 and at most %d, got %v", maxC, t.WarnCelsius)
	} else if t.FailCelsius > 0 && t.WarnCelsius > t.FailCelsius {
		ps.add("checks.thermal.warn_celsius", "%v is above fail_celsius (%v)", t.WarnCelsius, t.FailCelsius)
	}
	for i, g := range t.Exclude {
		if _, err := path.Match(g, ""); err != nil || g == "" {
			ps.add(fmt.Sprintf("checks.thermal.exclude[%d]", i), "%q is not a valid glob", g)
		}
	}
	// Per-class limits: 0 takes the general limit, so compare the
	// limits that will really apply.
	class := func(name string, warn, fail float64) {
		key := "checks.thermal." + name
		bad := false
		for _, l := range []struct {
			key string
			v   float64
		}{{key + "_warn_celsius", warn}, {key + "_fail_celsius", fail}} {
			if !(l.v >= 0 && l.v <= maxC) {
				ps.add(l.key, "want 0 (the general limit) to %d, got %v", maxC, l.v)
				bad = true
			}
		}
		if bad {
			return
		}
		if warn == 0 {
			warn = t.WarnCelsius
		}
		if fail == 0 {
			fail = t.FailCelsius
		}
		if warn > 0 && fail > 0 && warn > fail {
			ps.add(key+"_warn_celsius", "%v is above %s_fail_celsius (%v); a 0 stands for the general limit",
				warn, name, fail)
		}
	}
	class("cpu", t.CPUWarnCelsius, t.CPUFailCelsius)
	class("hca", t.HCAWarnCelsius, t.HCAFailCelsius)
}

// names checks module and process names: one word, no path.
func (ps *problems) names(key string, names []string) {
	for i, n := range names {
		if n == "" || strings.ContainsAny(n, "/ \t\n") {
			ps.add(fmt.Sprintf("%s[%d]", key, i), "%q is not a name", n)
		}
	}
}

func (ps *problems) mounts(ms []Mount) {
	seen := map[string]bool{}
	for i, m := range ms {
		at := fmt.Sprintf("checks.mounts.mount[%d]", i)
		ps.absPath(at+".path", m.Path, false)
		if filepath.IsAbs(m.Path) && filepath.Clean(m.Path) != m.Path {
			ps.add(at+".path", "write %q as %q, as /proc/mounts does", m.Path, filepath.Clean(m.Path))
		}
		if seen[m.Path] {
			ps.add(at+".path", "%q is listed twice", m.Path)
		}
		seen[m.Path] = true
		if strings.ContainsAny(m.FSType, " \t\n") {
			ps.add(at+".fstype", "%q is not a filesystem type", m.FSType)
		}
		if _, err := ParseFloor(m.MinFree); err != nil {
			ps.add(at+".min_free", "%v", err)
		}
	}
}
