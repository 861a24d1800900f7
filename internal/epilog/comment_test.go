package epilog

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/jobrun/jobruntest"
	"github.com/gpuhc/gpuhc/internal/policy"
	"github.com/gpuhc/gpuhc/internal/slurm"
)

func TestSummary(t *testing.T) {
	xid79 := events.Event{Kind: events.KindJobXID, Check: "gpu.xid", Component: "gpu3", Serial: "1654922000003", XID: 79, Status: "FAIL",
		Message: "XID 79 GPU has fallen off the bus during job 8"}
	xid13 := events.Event{Kind: events.KindJobXID, Check: "gpu.xid", Component: "gpu5", Serial: "1654922000005", XID: 13, Status: "WARN",
		Message: "XID 13 Graphics Engine Exception during job 8"}
	dbe := events.Event{Kind: events.KindJobMemory, Check: "gpu.memory", Component: "gpu2", Serial: "1654922000002", Status: "FAIL",
		Message: "volatile DBE 0 -> 1 during job 8 [simulated]"}
	dbeResult := check.Result{Check: "gpu.memory", Component: "gpu2", Status: check.Fail, Message: "volatile DBE 1 > 0", IDs: check.IDs{Serial: "1654922000002"}}
	leftover := check.Result{Check: "job.leftover", Component: "gpu1", Status: check.Fail, Message: "pid 7 (python3, uid 1001) holds 2048 MiB after job 8"}
	for _, c := range []struct {
		name   string
		evs    []events.Event
		worthy []check.Result
		kind   string
		want   string
	}{
		{"no fault", nil, nil, policy.Nothing, "gpuhc: no hardware fault seen"},
		{"a warn XID only", []events.Event{xid13}, nil, policy.Nothing, "gpuhc: no hardware fault seen; WARN: gpu5 (SN 1654922000005) XID 13"},
		{"an XID, drained", []events.Event{xid79, xid13}, nil, policy.Drained, "gpuhc: gpu3 (SN 1654922000003) XID 79; node drained"},
		{"an XID, storm guard", []events.Event{xid79}, nil, policy.DrainSuppressed, "gpuhc: gpu3 (SN 1654922000003) XID 79; drain held back by the storm guard"},
		{"a DBE named once", []events.Event{dbe}, []check.Result{dbeResult}, policy.Drained, "gpuhc: gpu2 (SN 1654922000002) volatile DBE 0 -> 1 [simulated]; node drained"},
		{"a check FAIL only", nil, []check.Result{leftover}, policy.AlreadyDrained, "gpuhc: gpu1 job.leftover: pid 7 (python3, uid 1001) holds 2048 MiB after job 8; node already drained"},
		{"drain failed", []events.Event{xid79}, nil, policy.Failed, "gpuhc: gpu3 (SN 1654922000003) XID 79; drain failed"},
	} {
		if got := Summary(c.evs, c.worthy, c.kind); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

// Long or hostile input: one printable line within policy.MaxReason, the
// verdict kept, the findings that did not fit counted.
func TestSummaryCapped(t *testing.T) {
	var evs []events.Event
	for i := range 40 {
		evs = append(evs, events.Event{Kind: events.KindJobXID, Component: fmt.Sprintf("gpu%d", i), Serial: "16549220000" + fmt.Sprint(i), XID: 79, Status: "FAIL"})
	}
	huge := check.Result{Check: "host.kernel", Component: "host", Status: check.Fail, Message: "a\nb\x1b[31m" + strings.Repeat("é", 400)}
	got := Summary(evs, []check.Result{huge}, policy.Drained)
	if len(got) > policy.MaxReason || !utf8.ValidString(got) || strings.ContainsAny(got, "\n\x1b") || got != policy.Sanitize(got) {
		t.Fatalf("%d bytes: %q", len(got), got)
	}
	if !strings.HasPrefix(got, "gpuhc: gpu0 (SN 165492200000) XID 79, gpu1") || !strings.HasSuffix(got, " more); node drained") {
		t.Errorf("%q", got)
	}
	// One finding alone longer than the line: cut, the verdict kept.
	got = Summary(nil, []check.Result{huge}, policy.Drained)
	if len(got) > policy.MaxReason || !strings.HasSuffix(got, "…; node drained") || !strings.HasPrefix(got, "gpuhc: host host.kernel: a b [31m") {
		t.Errorf("%d bytes: %q", len(got), got)
	}
}

// admin_comment on: the summary goes to the job, last, after the drain;
// a refusal (Slurm's "Job has already finished") is printed and logged
// and the exit status is the one the run had without it.
func TestAdminComment(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		args []string
		code int
		want string
	}{
		{"healthy", nil, []string{"--simulate", "dgxh100"}, 0, "comment 4242 gpuhc: no hardware fault seen"},
		{"healthy, refused", fmt.Errorf("scontrol: %w", slurm.ErrJobFinished), []string{"--simulate", "dgxh100"}, 0, "comment 4242 gpuhc: no hardware fault seen"},
		{"XID, refused", fmt.Errorf("rest: %w", slurm.ErrJobFinished), []string{"--simulate", "dgxh100", "--inject", "gpu3:xid=79"}, 1,
			"comment 4242 gpuhc: gpu3 (SN 1654922000003) XID 79 [simulated]; node drained"},
		{"XID, Slurm down", fmt.Errorf("connection refused"), []string{"--simulate", "dgxh100", "--inject", "gpu3:xid=79"}, 1,
			"comment 4242 gpuhc: gpu3 (SN 1654922000003) XID 79 [simulated]; node drained"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, s := jobruntest.NewBed(t, "[checks.thermal]\nenabled = false\n[epilog]\nadmin_comment = true\n"), jobruntest.NewSlurm("gpu001")
			runProlog(t, b, s, "--simulate", "dgxh100")
			s.CommentErr = c.err
			r := runEpilog(t, b, s, nil, jobruntest.Env("epilog_slurmd"), c.args...)
			calls := s.Calls()
			if r.code != c.code || len(calls) == 0 || calls[len(calls)-1] != c.want {
				t.Fatalf("exit %d (want %d), calls %q\n%s%s", r.code, c.code, calls, r.out, r.stderr)
			}
			switch {
			case c.err == nil && !strings.Contains(r.out, "job 4242: AdminComment set: gpuhc:"):
				t.Errorf("output:\n%s", r.out)
			case c.err != nil && !strings.Contains(r.out, "job 4242: AdminComment not set: ") ||
				c.err != nil && !strings.Contains(r.stderr, "job AdminComment not set"):
				t.Errorf("output:\n%s%s", r.out, r.stderr)
			}
			if jobruntest.Kinds(b.ReadEvents(t)) == "" {
				t.Error("no events")
			}
		})
	}
}

// Off by default, and never in a dry run.
func TestAdminCommentOffAndDryRun(t *testing.T) {
	b, s := jobruntest.NewBed(t, ""), jobruntest.NewSlurm("gpu001")
	if r := runEpilog(t, b, s, nil, jobruntest.Env("epilog_slurmd"), "--simulate", "dgxh100"); r.code != 0 || len(s.Calls()) != 0 {
		t.Fatalf("default: exit %d calls %q", r.code, s.Calls())
	}
	b = jobruntest.NewBed(t, "[epilog]\nadmin_comment = true\n")
	r := runEpilog(t, b, s, nil, jobruntest.Env("epilog_slurmd"), "--dry-run", "--simulate", "dgxh100")
	if r.code != 0 || len(s.Calls()) != 0 || !strings.Contains(r.out, `job 4242: dry run: would set AdminComment "gpuhc: no hardware fault seen"`) {
		t.Fatalf("dry run: exit %d calls %q\n%s", r.code, s.Calls(), r.out)
	}
}
