package epilog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/jobrun"
	"github.com/gpuhc/gpuhc/internal/policy"
	"github.com/gpuhc/gpuhc/internal/slurm"
)

// commentTime bounds the AdminComment update: it comes last, after the
// drain and the event log, and must not hold the epilog up.
const commentTime = 3 * time.Second

// maxItem caps what one finding takes of the summary, so that one long
// message leaves room for the others and the verdict.
const maxItem = 120

// NoFault is the summary of a job during which the epilog saw nothing.
const NoFault = "gpuhc: no hardware fault seen"

// Summary is the one line for the job's AdminComment: the FAILs the
// epilog attributes to the job (its job-xid and job-memory events) and
// found in its checks, then what became of the node (kind is the policy
// outcome), e.g.
//
//	gpuhc: gpu3 (SN 1654922000003) XID 79; node drained
//	gpuhc: no hardware fault seen; WARN: gpu5 (SN 1654922000005) XID 13
//
// It is a single printable line of at most policy.MaxReason bytes
// (policy.Sanitize); findings that do not fit are counted, "(+N more)",
// and the verdict is always kept.
func Summary(attributed []events.Event, worthy []check.Result, kind string) string {
	var faults, warns []string
	named := map[string]bool{}
	for _, ev := range attributed {
		it := eventItem(ev)
		switch ev.Status {
		case check.Fail.String():
			faults = append(faults, it)
			named[ev.Check+"\x00"+ev.Component] = true
		case check.Warn.String():
			warns = append(warns, it)
		}
	}
	for _, res := range worthy {
		if named[res.Check+"\x00"+res.Component] {
			continue // the job-memory event already says it
		}
		faults = append(faults, item(res.Component, res.IDs.Serial, res.Check+": "+res.Message))
	}
	if len(faults) == 0 {
		if len(warns) == 0 {
			return NoFault
		}
		return fit(NoFault+"; WARN: ", warns, "")
	}
	return fit("gpuhc: ", faults, "; "+verdict(kind))
}

// verdict says what the policy did about the faults.
func verdict(kind string) string {
	switch kind {
	case policy.Drained:
		return "node drained"
	case policy.AlreadyDrained:
		return "node already drained"
	case policy.WouldDrain:
		return "node would be drained (dry run)"
	case policy.DrainSuppressed:
		return "drain held back by the storm guard"
	case policy.ForeignDrain:
		return "node already drained by an admin"
	case policy.Failed:
		return "drain failed"
	}
	return "node not drained"
}

func eventItem(ev events.Event) string {
	what := ev.Message
	if ev.Kind == events.KindJobXID && ev.XID != 0 {
		what = fmt.Sprintf("XID %d", ev.XID)
	} else if before, _, ok := strings.Cut(what, " during job "); ok {
		what = before // the job is the one the comment is on
	}
	if strings.HasSuffix(ev.Message, " [simulated]") && !strings.HasSuffix(what, " [simulated]") {
		what += " [simulated]"
	}
	return item(ev.Component, ev.Serial, what)
}

func item(component, serial, what string) string {
	s := component
	if serial != "" {
		s += " (SN " + serial + ")"
	}
	s = policy.Sanitize(s + " " + what)
	if len(s) > maxItem {
		s = policy.Sanitize(strings.ToValidUTF8(s[:maxItem-len("…")], "") + "…")
	}
	return s
}

// fit joins as many items as fit between head and tail within
// policy.MaxReason, counting the rest.
func fit(head string, items []string, tail string) string {
	var b strings.Builder
	b.WriteString(head)
	for i, it := range items {
		sep := ""
		if i > 0 {
			sep = ", "
		}
		more := ""
		if rest := len(items) - i - 1; rest > 0 {
			more = fmt.Sprintf(" (+%d more)", rest)
		}
		// This item and the count of those after it must fit; else count
		// this one too.
		if b.Len()+len(sep)+len(it)+len(more)+len(tail) > policy.MaxReason && i > 0 {
			fmt.Fprintf(&b, " (+%d more)", len(items)-i)
			break
		}
		b.WriteString(sep + it)
	}
	s := b.String()
	if room := policy.MaxReason - len(tail); len(s) > room {
		s = strings.ToValidUTF8(s[:room], "")
	}
	return policy.Sanitize(s + tail)
}

// adminComment writes line to the job's AdminComment when [epilog]
// admin_comment is on: last, within commentTime, and never to any
// effect on the run: a failure is printed and logged, nothing more.
func adminComment(r *jobrun.Run, budget time.Duration, line string) {
	if !r.Cfg.Epilog.AdminComment || r.Job.JobID == "" {
		return
	}
	id := r.Job.JobID
	if r.Cfg.Policy.DryRun {
		fmt.Fprintf(r.P.Stdout, "job %s: dry run: would set AdminComment %q\n", id, line)
		return
	}
	err := setComment(r, budget, id, line)
	log := r.Log.WithField("admin_comment", line)
	switch {
	case err == nil:
		fmt.Fprintf(r.P.Stdout, "job %s: AdminComment set: %s\n", id, line)
		log.Info("job AdminComment set")
	case errors.Is(err, slurm.ErrJobFinished):
		fmt.Fprintf(r.P.Stdout, "job %s: AdminComment not set: Slurm refuses to update a completing job: %v\n", id, err)
		log.WithError(err).Warn("job AdminComment not set: Slurm refuses to update a completing job (docs/slurm.md)")
	default:
		fmt.Fprintf(r.P.Stdout, "job %s: AdminComment not set: %v\n", id, err)
		log.WithError(err).Warn("job AdminComment not set")
	}
}

func setComment(r *jobrun.Run, budget time.Duration, id, line string) error {
	ctl, err := r.Controller()
	if err != nil {
		return fmt.Errorf("node control: %w", err)
	}
	jc, ok := ctl.(slurm.JobCommenter)
	if !ok {
		return fmt.Errorf("%s cannot update jobs", ctl.Backend())
	}
	ctx, cancel := r.Context(budget)
	defer cancel()
	ctx, cancelC := context.WithTimeout(ctx, commentTime)
	defer cancelC()
	if err := jc.SetAdminComment(ctx, id, line); err != nil {
		return fmt.Errorf("job %s AdminComment via %s: %w", id, ctl.Backend(), err)
	}
	return nil
}
