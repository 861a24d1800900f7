// Package drainctl is gpuhc-drain, the admin's command line: it lists the
// drained and down nodes (gpuhc's own joined with their event-log detail,
// everyone else's marked as not gpuhc's), drains and resumes nodes with
// gpuhc's ownership rules, and reads the event logs for history and
// MTTF/MTTR statistics. It talks to Slurm through internal/slurm, REST or
// scontrol, like the health check. The main package only hands it the
// process's world.
package drainctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/logging"
	"github.com/gpuhc/gpuhc/internal/slurm"
	"github.com/gpuhc/gpuhc/internal/version"
)

// Exit codes.
const (
	ExitOK       = 0
	ExitRefused  = 1 // some node was refused or could not be changed
	ExitUsage    = 2 // usage or configuration error
	ExitInternal = 3 // Slurm or the event logs could not be read, a bug
)

const prog = "gpuhc-drain"

// Program is what the process gives gpuhc-drain.
type Program struct {
	Args     []string
	Getenv   func(string) string
	Hostname func() (string, error)
	Stdin    io.Reader
	Stdout   io.Writer
	Stderr   io.Writer
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	// NewController builds node control; nil: slurm.New. Tests pass an
	// in-memory controller.
	NewController func(cfg config.Slurm, log logrus.FieldLogger) (slurm.Controller, error)
	// UID is the real user id, for the "by" of events; nil: os.Getuid.
	UID func() int
	// StderrIsTerminal says whether Stderr is a terminal, where reading
	// many event logs shows progress; nil: not a terminal (silent).
	StderrIsTerminal func() bool
}

// usageError is a command-line mistake: exit 2 with a hint.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// exitError carries an exit code with an already printed (or empty) error.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e exitError) Unwrap() error { return e.err }

type command struct {
	name    string
	args    string
	summary string
	run     func(p Program, args []string) error
}

func commands() []command {
	return []command{
		{"list", "[NODES]", "drained and down nodes: reason, who, since when, and gpuhc's detail", Program.list},
		{"drain", "NODES --reason TEXT", "drain nodes with a \"gpuhc: \" reason and record it", Program.drain},
		{"resume", "NODES", "resume nodes drained by gpuhc (others only with --force) and record it", Program.resume},
		{"history", "", "events from the event logs, oldest first", Program.history},
		{"stats", "", "MTTF, MTTR and lemons from the event logs", Program.stats},
		{"lemons", "[--apply|--revert]", "rank the lemons against the fleet; quarantine them by Slurm weight (--apply, --revert)", Program.lemons},
		{"report", "--html FILE", "the fleet report: one self-contained HTML page", Program.report},
		{"job", "JOBID", "did the hardware kill my job? hardware events on its nodes while it ran", Program.job},
		{"rma", "", "parts escalated to a return to the vendor, with their history, for the ticket", Program.rma},
	}
}

func (p Program) mainUsage(w io.Writer) {
	fmt.Fprintf(w, "Usage: %s COMMAND [options] [args]\n\n", prog)
	fmt.Fprint(w, "The admin's view of gpuhc's drains, and MTTF/MTTR statistics.\n\nCommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, `
Run "%s COMMAND --help" for a command's options. Every command takes
--config FILE (default %s), and prints a table, or --json or --csv.
"%s --version" prints the version.

Exit status: 0 done, 1 a node was refused or could not be changed,
2 usage or configuration error, 3 Slurm or the event logs could not be read.
`, prog, config.DefaultPath, prog)
}

// Main runs the program and returns the exit code.
func (p Program) Main() (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(p.Stderr, "%s: internal error: %v\n%s", prog, r, debug.Stack())
			code = ExitInternal
		}
	}()
	args := p.Args
	if len(args) == 0 {
		p.mainUsage(p.Stderr)
		return ExitUsage
	}
	switch args[0] {
	case "--version", "-version", "version":
		fmt.Fprintln(p.Stdout, version.String(prog))
		return ExitOK
	case "--help", "-help", "-h", "help":
		if len(args) > 1 && args[0] == "help" {
			return p.dispatch(args[1], []string{"--help"})
		}
		p.mainUsage(p.Stdout)
		return ExitOK
	}
	return p.dispatch(args[0], args[1:])
}

func (p Program) dispatch(name string, args []string) int {
	for _, c := range commands() {
		if c.name == name {
			return p.exit(c.run(p, args))
		}
	}
	fmt.Fprintf(p.Stderr, "%s: unknown command %q (see %s --help)\n", prog, name, prog)
	return ExitUsage
}

func (p Program) exit(err error) int {
	var ue usageError
	var ee exitError
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.As(err, &ue):
		fmt.Fprintf(p.Stderr, "%s: %v (see --help)\n", prog, err)
		return ExitUsage
	case errors.As(err, &ee):
		if ee.err != nil {
			fmt.Fprintf(p.Stderr, "%s: %v\n", prog, ee.err)
		}
		return ee.code
	default:
		fmt.Fprintf(p.Stderr, "%s: %v\n", prog, err)
		return ExitInternal
	}
}

func (p Program) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

func (p Program) getenv(k string) string {
	if p.Getenv == nil {
		return ""
	}
	return p.Getenv(k)
}

// who is the admin behind the command: the sudo caller first, then $USER,
// then the real uid's name.
func (p Program) who() string {
	for _, k := range []string{"SUDO_USER", "USER", "LOGNAME"} {
		if u := strings.TrimSpace(p.getenv(k)); u != "" {
			return u
		}
	}
	uid := os.Getuid()
	if p.UID != nil {
		uid = p.UID()
	}
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil && u.Username != "" {
		return u.Username
	}
	return "uid" + strconv.Itoa(uid)
}

// by is the event log's "by" for this admin.
func (p Program) by() string { return prog + ":" + p.who() }

// hostNode is this host's short name, for the config's [[host]] sections.
func (p Program) hostNode() string {
	if p.Hostname == nil {
		return ""
	}
	h, err := p.Hostname()
	if err != nil {
		return ""
	}
	h, _, _ = strings.Cut(h, ".")
	return h
}

// loadConfig reads the configuration as it applies to node ("" for this
// host). A configuration error is a usage error: nothing is changed.
func (p Program) loadConfig(o *common, node string) (config.Config, error) {
	if node == "" {
		node = p.hostNode()
	}
	if node == "" || slurm.ValidateName(node) != nil {
		node = "localhost"
	}
	cfg, err := config.LoadOrDefault(o.configPath, node, o.explicit)
	if err != nil {
		return config.Config{}, exitError{ExitUsage, fmt.Errorf("configuration error, nothing done: %w", err)}
	}
	return cfg, nil
}

// eventTemplate is the configured events.file with %n left in place, so
// that reading can take every node's file.
func (p Program) eventTemplate(o *common) (string, error) {
	cfg, err := config.LoadOrDefault(o.configPath, config.NodeVar, o.explicit)
	if err != nil {
		return "", exitError{ExitUsage, fmt.Errorf("configuration error: %w", err)}
	}
	return cfg.Events.File, nil
}

// logger is the Slurm client's: warnings (everything with -v) on stderr,
// and to syslog when [log] syslog is on. Close the closer when done.
func (p Program) logger(o *common, cfg config.Log) (*logrus.Logger, io.Closer) {
	l := logrus.New()
	l.SetOutput(p.Stderr)
	l.SetFormatter(&logrus.TextFormatter{DisableColors: true, DisableTimestamp: true})
	l.SetLevel(logrus.WarnLevel)
	if o.verbose {
		l.SetLevel(logrus.DebugLevel)
	}
	return l, logging.AddSyslog(l, cfg, prog)
}

// controller builds node control; the closer ends its logging.
func (p Program) controller(o *common, cfg config.Config) (slurm.Controller, io.Closer, error) {
	log, closer := p.logger(o, cfg.Log)
	var ctl slurm.Controller
	var err error
	if p.NewController != nil {
		ctl, err = p.NewController(cfg.Slurm, log)
	} else {
		ctl, err = slurm.New(cfg.Slurm, slurm.WithLogger(log))
	}
	if err != nil {
		closer.Close()
		return nil, nil, err
	}
	return ctl, closer, nil
}

// slurmContext bounds a command's Slurm calls: each call has its own
// timeout and retries; this is the backstop for many nodes at once.
func slurmContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 5*time.Minute)
}
