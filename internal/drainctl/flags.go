package drainctl

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/lazyre"
	"github.com/gpuhc/gpuhc/internal/slurm"
)

// Output formats.
const (
	formatTable = "table"
	formatJSON  = "json"
	formatCSV   = "csv"
)

// common holds the options every command takes.
type common struct {
	configPath string
	explicit   bool
	json, csv  bool
	verbose    bool
	events     multi
}

func (o *common) format() string {
	switch {
	case o.json:
		return formatJSON
	case o.csv:
		return formatCSV
	}
	return formatTable
}

// multi is a repeatable string flag.
type multi []string

func (m *multi) String() string { return strings.Join(*m, ",") }

func (m *multi) Set(v string) error {
	if v == "" {
		return errors.New("empty value")
	}
	*m = append(*m, v)
	return nil
}

// flags builds a command's flag set with the common options; withEvents
// adds --events for the commands that read the event logs.
func (p Program) flags(name, args, about string, o *common, withEvents bool) *flag.FlagSet {
	fs := flag.NewFlagSet(prog+" "+name, flag.ContinueOnError)
	fs.SetOutput(p.Stderr)
	fs.StringVar(&o.configPath, "config", config.DefaultPath, "configuration `file`")
	fs.BoolVar(&o.json, "json", false, "print JSON (an array of objects)")
	fs.BoolVar(&o.csv, "csv", false, "print CSV with a header line")
	fs.BoolVar(&o.verbose, "v", false, "log Slurm backend choices and fallbacks to stderr")
	if withEvents {
		fs.Var(&o.events, "events", "event log `path`: a file (.gz too), a glob, a directory of logs, or - for stdin;\n"+
			"repeatable (default: the configuration's events.file, with %n as every node)")
	}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s %s [options] %s\n\n%s\n\nOptions:\n", prog, name, args, about)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses flags given before, between or after the positional
// arguments ("drain gpu001 --reason x"), up to a "--".
func parse(fs *flag.FlagSet, o *common, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError{err.Error()}
		}
		rest := fs.Args()
		used := len(args) - len(rest)
		if used > 0 && args[used-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		if len(rest) == 0 {
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "config" {
			o.explicit = true
		}
	})
	if o.json && o.csv {
		return nil, usagef("--json and --csv exclude each other")
	}
	return pos, nil
}

// maxNodes bounds a hostlist expansion on the command line.
const maxNodes = 65536

// nodeArgs expands node arguments (names, "a,b" lists, Slurm hostlists
// such as gpu[001-004]) into distinct, valid node names, in order.
func nodeArgs(args []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, a := range args {
		names := []string{a}
		if strings.ContainsAny(a, "[,") {
			var err error
			if names, err = config.ExpandHostList(a, maxNodes); err != nil {
				return nil, usagef("node list %q: %v", a, err)
			}
		}
		for _, n := range names {
			if err := slurm.ValidateName(n); err != nil {
				return nil, usagef("node %q: %v", n, err)
			}
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	return out, nil
}

// nodeMatcher is a --node filter: a hostlist expression or glob.
func nodeMatcher(expr string) (func(string) bool, error) {
	if expr == "" {
		return func(string) bool { return true }, nil
	}
	h, err := config.ParseHostList(expr)
	if err != nil {
		return nil, usagef("--node %q: %v", expr, err)
	}
	return h.Match, nil
}

// checkMatcher is a --check filter: the check's full name ("host.mounts"),
// a group ("host" matches host.*), or a glob ("gpu.*").
func checkMatcher(expr string) func(string) bool {
	if expr == "" {
		return func(string) bool { return true }
	}
	return func(c string) bool {
		if c == expr || strings.HasPrefix(c, expr+".") {
			return true
		}
		ok, _ := path.Match(expr, c)
		return ok
	}
}

var daysRE = lazyre.New(`^(\d+)([dw])`)

// parseWhen reads a --since/--until value: a duration back from now
// ("36h", "7d", "2w", "1d12h") or a time ("2026-11-30",
// "2026-11-30T08:00", "2026-11-30 08:00:00", RFC 3339). Times without a
// zone are local.
func parseWhen(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if d, ok := parseAgo(s); ok {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02T15:04", "2006-01-02 15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, now.Location()); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is neither a duration (36h, 7d, 2w) nor a time (2026-11-30, 2026-11-30T08:00, RFC 3339)", s)
}

func parseAgo(s string) (time.Duration, bool) {
	var total time.Duration
	rest := s
	for {
		m := daysRE.FindStringSubmatch(rest)
		if m == nil {
			break
		}
		n, err := strconv.Atoi(m[1])
		if err != nil || n > 100000 {
			return 0, false
		}
		day := 24 * time.Hour
		if m[2] == "w" {
			day *= 7
		}
		if time.Duration(n) > (math.MaxInt64-total)/day {
			return 0, false // past a time.Duration (292 years): it would wrap
		}
		total += time.Duration(n) * day
		rest = rest[len(m[0]):]
	}
	if rest != "" {
		d, err := time.ParseDuration(rest)
		if err != nil || d > math.MaxInt64-total {
			return 0, false
		}
		total += d
	}
	return total, total >= 0
}

func noArgs(pos []string) error {
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	return nil
}
