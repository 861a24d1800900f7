package healthcheck

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/policy"
)

// tracker knows which checks have finished, for the early drain and for
// the trace a SIGTERM leaves.
type tracker struct {
	mu    sync.Mutex
	names []string
	done  []bool
	timed []check.Timed
}

func newTracker(tasks []check.Task) *tracker {
	t := &tracker{names: make([]string, len(tasks)), done: make([]bool, len(tasks))}
	for i, task := range tasks {
		t.names[i] = check.NameOf(task.Check)
	}
	return t
}

func (t *tracker) finish(i int, tm check.Timed) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.done[i] = true
	t.timed = append(t.timed, tm)
}

// running names the checks that have not returned yet.
func (t *tracker) running() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for i, d := range t.done {
		if !d {
			out = append(out, t.names[i])
		}
	}
	return out
}

// results are the finished checks' results, ordered as check.Flatten does.
func (t *tracker) results() []check.Result {
	t.mu.Lock()
	defer t.mu.Unlock()
	return check.Flatten(t.timed)
}

// earlyGrace is how long a drain-worthy FAIL waits for the other checks
// before it drains alone. A run that completes within it drains once,
// from the full results, exactly as before (same Slurm calls); a run with
// a slow or hung check drains after earlyGrace instead of at the deadline.
const earlyGrace = time.Second

// earlyDrain drains as soon as a finished check has a FAIL that will
// drain, while slower checks still run (policy.Engine.Early). Its drain,
// events and state are saved at once, so a kill later in the run loses
// nothing; the run's full policy then finds the drain made and keeps its
// reason.
type earlyDrain struct {
	p       Program
	log     *logrus.Entry
	node    string
	cfg     config.Config
	callEnd time.Time
	tr      *tracker
	on      bool

	started  bool
	finished chan struct{} // closed when every check has returned
	done     chan struct{} // closed when the early drain is over
}

func (p Program) earlyDrainer(log *logrus.Entry, node string, cfg config.Config, b config.Budget, o options, start time.Time, tr *tracker) *earlyDrain {
	// A dry run changes nothing, and a --deep run's drain is recorded as
	// another program's: both keep the single policy run at the end.
	return &earlyDrain{p: p, log: log.WithField("early", true), node: node, cfg: cfg, callEnd: start.Add(b.CallsEnd), tr: tr,
		on: !cfg.Policy.DryRun && !o.deep, finished: make(chan struct{}), done: make(chan struct{})}
}

// offer is called as each check finishes.
func (e *earlyDrain) offer() {
	if !e.on || e.started || !e.drainWorthy() {
		return
	}
	e.started = true
	go func() {
		defer close(e.done)
		select {
		case <-e.finished:
			return // the full run drains, from every result
		case <-time.After(earlyGrace):
		}
		running := e.tr.running()
		if len(running) == 0 {
			return
		}
		ctx, cancel := context.WithDeadline(context.Background(), e.callEnd)
		defer cancel()
		e.log.WithField("still_running", strings.Join(running, ",")).Warn("draining now for a FAIL; not waiting for the checks still running")
		if _, err := e.p.applyPolicy(ctx, e.log, e.node, e.cfg, e.tr.results(), runEarly); err != nil {
			e.log.WithError(err).Error(policyFailure(err, "early drain failed; the run's policy retries at its end"))
		}
	}()
}

func (e *earlyDrain) drainWorthy() bool {
	return len(policy.Engine{Policy: e.cfg.Policy}.DrainWorthy(e.tr.results())) > 0
}

// wait is called once every check has returned: it ends a pending early
// drain before it starts, or waits for one under way.
func (e *earlyDrain) wait() {
	close(e.finished)
	if e.started {
		<-e.done
	}
}

// killBudget bounds the last write after SIGTERM: on 26.05 slurmd sends
// SIGKILL 10 ms after it.
const killBudget = 5 * time.Millisecond

// onTerm hands slurmd's SIGTERM to a last, bounded write (an event naming
// the checks still running, and a line on stderr for slurmd's log), then
// exits. The watchdog fires before HealthCheckTimeout, in gpuhc's own
// time: this is the backstop for a kill that comes first anyway (an
// admin's, or a limit gpuhc misread). The returned func stops listening.
func (p Program) onTerm(log *logrus.Entry, node string, cfg config.Config, tr *tracker, start time.Time) func() {
	ch, stop := p.Term, func() {}
	if ch == nil {
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		ch, stop = c, func() { signal.Stop(c) }
	}
	quit := make(chan struct{})
	go func() {
		select {
		case <-ch:
			p.killed(log, node, cfg, tr, start)
		case <-quit:
		}
	}()
	return func() { close(quit); stop() }
}

func (p Program) killed(log *logrus.Entry, node string, cfg config.Config, tr *tracker, start time.Time) {
	running := tr.running()
	msg := fmt.Sprintf("killed by SIGTERM after %s; still running: %s", time.Since(start).Round(time.Millisecond), strings.Join(running, ", "))
	if len(running) == 0 {
		msg = fmt.Sprintf("killed by SIGTERM after %s, after the checks (in a Slurm call or the books)", time.Since(start).Round(time.Millisecond))
	}
	fmt.Fprintf(p.Stderr, "gpuhc-healthcheck: %s\n", msg)
	if !cfg.Policy.DryRun {
		ctx, cancel := context.WithTimeout(context.Background(), killBudget)
		ev := events.Event{Time: p.Clock(), Kind: events.KindKilled, Node: node, Message: msg, By: policy.By, BootID: p.bootID(cfg)}
		if err := (events.Log{Path: cfg.Events.File}).Append(ctx, ev); err != nil {
			log.WithError(err).Error("event log")
		}
		cancel()
	}
	p.Exit(ExitInternal)
}

// nodeHealth is SLURM_NODE_IS_HEALTHY, which slurmd 26.05.2+ passes to
// slurmctld-triggered runs with SlurmctldParameters=health_check_report
// (always from 26.11): "no" when slurmctld has the node DRAIN(ING), DOWN,
// FAIL or in a MAINT reservation, "yes" otherwise; unset on slurmd's
// start-up run and on older versions. Anything but yes or no is ignored.
func nodeHealth(getenv func(string) string) (string, bool) {
	switch v := getenv("SLURM_NODE_IS_HEALTHY"); v {
	case "yes", "no":
		return v, true
	}
	return "", false
}

// healthHint compares slurmctld's word with gpuhc's state, for the log.
// It changes no decision and saves no call (docs/slurm-timeouts.md): the
// value was computed when slurmctld sent the health check RPC, before
// this run, and "no" does not say whose drain it is, so acting on it could
// overwrite an admin's fresh reason or forget a drain of ours made since.
func healthHint(health string, drainedByUs, failing bool) string {
	switch {
	case health == "no" && !drainedByUs && !failing:
		return "slurmctld reports the node out of service (drain, down, fail or maintenance) and gpuhc did not drain it: left to whoever did"
	case health == "yes" && drainedByUs:
		return "gpuhc's state has the node drained, but slurmctld reported it in service when this run was sent: someone resumed it, or the drain came after; the next resume check reads the node"
	}
	return ""
}
