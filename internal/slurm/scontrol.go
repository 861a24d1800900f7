package slurm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// DefaultScontrol is where distribution packages install scontrol.
const DefaultScontrol = "/usr/bin/scontrol"

// maxOutput caps what we keep of scontrol's stdout and stderr.
const maxOutput = 1 << 20

// maxListOutput caps `scontrol -o show nodes`: about 1 KB a node, so
// 64 MiB is some 60,000 nodes.
const maxListOutput = 64 << 20

// Scontrol drives a node by running scontrol, which works with every Slurm
// release. It runs the binary directly with an argument vector: no shell
// ever sees a node name or reason.
type Scontrol struct {
	path    string
	timeout time.Duration
	env     []string
	loc     *time.Location // zone scontrol prints times in
	calls   *Counter
}

// NewScontrol prepares to run the scontrol at path (absolute: slurmd gives
// health checks no PATH). It runs nothing.
func NewScontrol(path string, timeout time.Duration, opts ...Option) (*Scontrol, error) {
	o := buildOptions(opts)
	if path == "" {
		path = DefaultScontrol
	}
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("scontrol path %q is not absolute", path)
	}
	env, loc := o.env, time.Local
	if env == nil {
		env, loc = fixedEnv(), time.UTC
	}
	return &Scontrol{path: path, timeout: timeout, env: env, loc: loc, calls: o.counter}, nil
}

// fixedEnv is all scontrol gets. TZ=UTC0 and no SLURM_TIME_FORMAT make the
// times it prints ISO 8601 in UTC whatever the caller's environment says.
// SLURM_CONF passes through: a site with a non-default config location
// needs it, and it is not something a user can use against us here.
func fixedEnv() []string {
	env := []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", "TZ=UTC0"}
	if c := os.Getenv("SLURM_CONF"); c != "" {
		env = append(env, "SLURM_CONF="+c)
	}
	return env
}

// Backend names this mechanism.
func (s *Scontrol) Backend() string { return "scontrol" }

// Calls is how many times scontrol was run.
func (s *Scontrol) Calls() int { return s.calls.Load() }

// Node reads one node with `scontrol -o show node NAME`.
func (s *Scontrol) Node(ctx context.Context, name string) (Node, error) {
	if err := ValidateName(name); err != nil {
		return Node{}, err
	}
	out, err := s.run(ctx, "-o", "show", "node", name)
	if err != nil {
		return Node{}, err
	}
	n, err := parseShowNode(out, name, s.loc)
	if err != nil {
		return Node{}, fmt.Errorf("scontrol show node %s: %w", name, err)
	}
	return n, nil
}

// Nodes lists every node with `scontrol -o show nodes`, one line each.
func (s *Scontrol) Nodes(ctx context.Context) ([]Node, error) {
	out, err := s.runCapped(ctx, maxListOutput, "-o", "show", "nodes")
	if err != nil {
		return nil, err
	}
	ns, err := parseShowNodes(out, s.loc)
	if err != nil {
		return nil, fmt.Errorf("scontrol show nodes: %w", err)
	}
	return ns, nil
}

// Drain runs `scontrol update NodeName=NAME State=DRAIN Reason=REASON`,
// the reason being one argument however many spaces it holds.
func (s *Scontrol) Drain(ctx context.Context, name, reason string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if err := checkReason(reason); err != nil {
		return err
	}
	_, err := s.run(ctx, "update", "NodeName="+name, "State=DRAIN", "Reason="+reason)
	return err
}

// Resume runs `scontrol update NodeName=NAME State=RESUME`.
func (s *Scontrol) Resume(ctx context.Context, name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	_, err := s.run(ctx, "update", "NodeName="+name, "State=RESUME")
	return err
}

// Tune runs `scontrol update NodeName=NAME [Weight=N]
// [AvailableFeatures=a,b] [ActiveFeatures=a]`, each one argument.
func (s *Scontrol) Tune(ctx context.Context, name string, set Settings) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if err := CheckSettings(set); err != nil {
		return err
	}
	args := []string{"update", "NodeName=" + name}
	if set.Weight != nil {
		args = append(args, "Weight="+strconv.FormatUint(uint64(*set.Weight), 10))
	}
	if set.Features != nil {
		args = append(args, "AvailableFeatures="+strings.Join(*set.Features, ","))
	}
	if set.ActiveFeatures != nil {
		args = append(args, "ActiveFeatures="+strings.Join(*set.ActiveFeatures, ","))
	}
	_, err := s.run(ctx, args...)
	return err
}

// run executes scontrol under the timeout and returns its stdout; a
// failure carries scontrol's stderr, which says what Slurm objected to.
func (s *Scontrol) run(ctx context.Context, args ...string) ([]byte, error) {
	return s.runCapped(ctx, maxOutput, args...)
}

// runCapped is run keeping at most limit bytes of stdout. Output beyond it
// is an error, never a silently shortened answer.
func (s *Scontrol) runCapped(ctx context.Context, limit int, args ...string) ([]byte, error) {
	if s.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, s.path, args...)
	cmd.Env = s.env
	cmd.Dir = "/" // slurmd's working directory is not ours to depend on
	// A child that keeps the pipes open must not hang us after a kill.
	cmd.WaitDelay = time.Second
	stdout, stderr := capped{limit: limit}, capped{limit: maxOutput}
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	s.calls.Add(1)
	err := cmd.Run()
	if err != nil {
		return nil, s.runError(ctx, args, err, stdout.String(), stderr.String())
	}
	if stdout.cut {
		return nil, fmt.Errorf("%s %s: output over %d bytes", s.path, strings.Join(quoteArgs(args), " "), limit)
	}
	return stdout.Bytes(), nil
}

// runError says what ran and what scontrol said. Its explanation is on
// stderr, except "Node X not found", which `show node` prints on stdout
// (recorded, 22.05 and 24.11).
func (s *Scontrol) runError(ctx context.Context, args []string, err error, stdout, stderr string) error {
	if ctx.Err() != nil {
		err = fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	said := oneLine(stderr)
	if said == "" {
		said = oneLine(stdout)
	}
	msg := fmt.Sprintf("%s %s: %v", s.path, strings.Join(quoteArgs(args), " "), err)
	if said != "" {
		msg += ": " + said
	}
	return &ScontrolError{msg: msg, Output: said, err: err, notFound: notFoundText(said), job: jobText(said)}
}

// notFoundText recognises scontrol's "no such node" answers: "Node X not
// found" (show) and "Invalid node name specified" (update), both recorded.
func notFoundText(s string) bool {
	return strings.Contains(s, "Invalid node name specified") ||
		(strings.HasPrefix(s, "Node ") && strings.HasSuffix(s, " not found"))
}

// ScontrolError is a failed scontrol run.
type ScontrolError struct {
	msg string
	// Output is what scontrol said, on one line: stderr, or stdout when
	// stderr was empty.
	Output   string
	err      error
	notFound bool
	job      error // ErrJobFinished, ErrJobNotFound or nil
}

func (e *ScontrolError) Error() string { return e.msg }

// Unwrap exposes the exec error, and ErrNodeNotFound, ErrJobFinished or
// ErrJobNotFound where they apply.
func (e *ScontrolError) Unwrap() []error {
	errs := []error{e.err}
	if e.notFound {
		errs = append(errs, ErrNodeNotFound)
	}
	if e.job != nil {
		errs = append(errs, e.job)
	}
	return errs
}

// ExitCode is scontrol's exit status, or -1 when it did not exit normally.
func (e *ScontrolError) ExitCode() int {
	var ee *exec.ExitError
	if errors.As(e.err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// quoteArgs quotes arguments that hold spaces, so a logged command line
// reads as the argv it was.
func quoteArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\"'\\$`") {
			a = fmt.Sprintf("%q", a)
		}
		out[i] = a
	}
	return out
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// capped is a buffer that keeps the first limit bytes and drops the rest,
// so a runaway child cannot exhaust our memory; cut says it dropped some.
// The buffer is a field, not embedded: an embedded bytes.Buffer would lend
// capped its ReadFrom, and io.Copy would use that and bypass the cap.
type capped struct {
	buf   bytes.Buffer
	limit int
	cut   bool
}

func (c *capped) Write(p []byte) (int, error) {
	n := len(p)
	if room := c.limit - c.buf.Len(); n > room {
		c.cut = true
		p = p[:max(room, 0)]
	}
	c.buf.Write(p)
	return n, nil // the rest is drained, not refused: the child must not block
}

func (c *capped) Bytes() []byte  { return c.buf.Bytes() }
func (c *capped) String() string { return c.buf.String() }
