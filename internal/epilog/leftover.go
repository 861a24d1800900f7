package epilog

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/gpu"
	"github.com/gpuhc/gpuhc/internal/jobenv"
)

// LeftoverName is the check's name in results and reasons.
const LeftoverName = "job.leftover"

// Leftover judges what a job left on the GPUs: its processes still
// holding a GPU, and GPU memory not given back.
//
// Only evidence makes a process the job's: its cgroup or its environment
// names this job (task/cgroup's job_<id>, SLURM_JOB_ID) and it runs as
// the job's user. Only such processes are ever signalled, on whatever
// GPU they are (root's, and a setuid program's, never: they are
// reported). A process of the job's user that names no job (started over
// ssh without pam_slurm_adopt, under env -i, a daemonised helper) may as
// well be another job's of the same user: on one of the job's GPUs it is
// reported (WARN), never killed and never drained for; on other GPUs it
// is not judged. Other users' and other jobs' processes are never
// judged, and neither is the memory of a GPU they hold.
//
// Memory is judged only on the job's GPUs (jobenv.Env.HasGPU): on none
// after a job without GPUs, nor when the job's GPUs cannot be told.
type Leftover struct {
	Node *gpu.Node
	Job  jobenv.Env
	Cfg  config.Epilog
	// Proc reads /proc (ReadProc under the config's root).
	Proc func(pid int) (Proc, error)
	// Kill is nil where killing is not allowed (a dry run, a simulation,
	// a fixture root): "kill" then only says what it would kill.
	Kill Killer
}

// Name implements check.Check.
func (c *Leftover) Name() string { return LeftoverName }

// held is one process on one GPU as NVML lists it.
type held struct {
	pid  int
	mib  uint64
	proc Proc
	err  error
	// kill is what the killer did with it.
	kill KillOutcome
}

// survey is who held one GPU before anything was signalled.
type survey struct {
	g      gpu.GPU
	jobGPU bool
	// listed: NVML listed the GPU's processes.
	listed bool
	// ours name this job; suspects are the job user's and name no job;
	// foreign are anyone else's; unknown could not be looked up.
	ours, suspects, foreign, unknown []held
}

// Times of "kill" mode.
const (
	// killWait is what SIGKILL is given: a process still there after it
	// is stuck (FAIL). One that the deadline left less time is only "not
	// gone yet" (WARN): a process freeing GiBs of memory, or a GPU
	// context, takes a while to end.
	killWait = 3 * time.Second
	// afterKill is kept after the SIGKILL wait to read the memory and
	// give the verdicts.
	afterKill = time.Second
	// memorySettle is how long the driver is given to free the memory of
	// processes just killed.
	memorySettle = time.Second
)

// Run implements check.Check: one result per GPU. It first finds who
// holds each GPU, then (in "kill" mode) ends the job's processes on all
// GPUs together, then judges each GPU.
func (c *Leftover) Run(ctx context.Context) []check.Result {
	ctx, cancel := check.FinishEarly(ctx)
	defer cancel()
	start := time.Now()
	if c.Job.UID < 0 {
		return []check.Result{{Component: "host", Status: check.Skip, Message: "job uid unknown (no valid SLURM_JOB_UID): leftovers not judged"}}
	}
	inv, err := c.Node.Inventory(ctx)
	if err != nil {
		return c.mark([]check.Result{gpu.NodeResult(err, start)})
	}
	v2 := hasSymbol(c.Node.Lib(), "nvmlDeviceGetMemoryInfo_v2")
	var ss []*survey
	var hung []check.Result
	for _, g := range inv.GPUs {
		s, err := c.survey(ctx, g)
		if errors.Is(err, gpu.ErrHung) {
			hung = append(hung, gpu.Hung(g.Component(), g.IDs(), start))
			break
		}
		ss = append(ss, s)
	}
	k := c.kill(ctx, ss)
	var out []check.Result
	for _, s := range ss {
		r, err := c.verdict(ctx, s, k, v2, len(hung) > 0)
		if errors.Is(err, gpu.ErrHung) {
			// Later GPUs are judged without NVML, as after a hung survey.
			hung = append(hung, gpu.Hung(s.g.Component(), s.g.IDs(), start))
			continue
		}
		out = append(out, r)
	}
	out = append(out, hung...)
	if c.Job.GPUScope == jobenv.GPUsUnknown {
		out = append(out, check.Result{Component: "host", Status: check.Error, Action: check.ActionNone,
			Message: "cannot tell the job's GPUs (" + c.gpuVars() + "): memory, and processes naming no job, not judged"})
	}
	return c.mark(out)
}

// mark tags what a simulation made up.
func (c *Leftover) mark(out []check.Result) []check.Result {
	if c.Node.Simulated != "" {
		for i := range out {
			out[i].Message += " [simulated]"
		}
	}
	return out
}

// gpuVars shows why the job's GPUs are unknown: the refused variable,
// else what CUDA_VISIBLE_DEVICES held (validated: letters, digits and
// "-_/:." only).
func (c *Leftover) gpuVars() string {
	for _, p := range c.Job.Problems {
		if strings.HasPrefix(p, jobenv.VarJobGPUs+"=") || strings.HasPrefix(p, jobenv.VarCUDA+"=") {
			return p
		}
	}
	v := strings.Join(c.Job.CUDAVisible, ",")
	if len(v) > 64 {
		v = v[:64] + "..."
	}
	return jobenv.VarCUDA + "=" + v + " names no GPU"
}

// survey lists g's processes and sorts them by owner.
func (c *Leftover) survey(ctx context.Context, g gpu.GPU) (*survey, error) {
	s := &survey{g: g, jobGPU: c.Job.HasGPU(gresIndex(ctx, g), g.UUID)}
	procs, err := c.processes(ctx, g)
	if err != nil || procs == nil {
		return s, err
	}
	s.listed = true
	for _, h := range procs {
		switch {
		case errors.Is(h.err, errGone):
			// Ended since NVML listed it.
		case h.err != nil:
			s.unknown = append(s.unknown, h)
		case c.names(h.proc):
			s.ours = append(s.ours, h)
		case h.proc.JobID == "" && h.proc.UID() == c.Job.UID && h.proc.UID() != 0:
			s.suspects = append(s.suspects, h)
		default:
			s.foreign = append(s.foreign, h)
		}
	}
	return s, nil
}

// names reports whether p is shown to be this job's: its cgroup or
// environment names the job, and it runs as the job's user.
func (c *Leftover) names(p Proc) bool {
	return c.Job.JobID != "" && p.JobID == c.Job.JobID && p.UID() == c.Job.UID
}

// kills is what "kill" did with the job's processes, by pid.
type kills struct {
	// out holds the outcome of each process signalled.
	out map[int]KillOutcome
	// refused are never signalled (root's, or a setuid program's); would
	// are what a run without a killer (a dry run, a simulation) would
	// have signalled.
	refused, would map[int]bool
	// full: the wait after SIGKILL could run its whole killWait.
	full bool
	// done is when the kills ended; zero when none was made.
	done time.Time
}

// kill ends the job's processes, on all GPUs at once ("kill" mode).
func (c *Leftover) kill(ctx context.Context, ss []*survey) kills {
	k := kills{out: map[int]KillOutcome{}, refused: map[int]bool{}, would: map[int]bool{}}
	if c.Cfg.Leftover != config.LeftoverKill {
		return k
	}
	var procs []Proc
	seen := map[int]bool{}
	for _, s := range ss {
		for _, h := range s.ours {
			if seen[h.pid] {
				continue // one process on several GPUs
			}
			seen[h.pid] = true
			switch {
			case h.proc.UID() == 0 || !h.proc.OwnedBy(c.Job.UID):
				k.refused[h.pid] = true
			case c.Kill == nil:
				k.would[h.pid] = true
			default:
				procs = append(procs, h.proc)
			}
		}
	}
	if len(procs) == 0 {
		return k
	}
	grace, wait := c.killTimes(ctx)
	k.full = wait >= killWait
	outs := c.Kill.Kill(ctx, procs, grace, wait)
	for i, p := range procs {
		o := KillOutcome{Result: KillError, Err: errors.New("the killer gave no outcome")}
		if i < len(outs) {
			o = outs[i]
		}
		k.out[p.PID] = o
	}
	k.done = time.Now()
	return k
}

// killTimes splits the time left: the wait after SIGKILL and the time to
// judge afterwards come off it first, so that the SIGTERM grace (and a
// slow survey before it) can never leave SIGKILL a mere moment and turn
// a process still ending into a FAIL.
func (c *Leftover) killTimes(ctx context.Context) (grace, wait time.Duration) {
	left := time.Duration(math.MaxInt64)
	if dl, ok := ctx.Deadline(); ok {
		left = time.Until(dl)
	}
	wait = max(0, min(killWait, left-afterKill))
	grace = max(0, min(c.Cfg.KillGrace.Duration, left-afterKill-killWait))
	return grace, wait
}

// verdict judges one GPU after the kills. ErrHung comes back only for an
// NVML call that did not answer while time was left; when the time ran
// out in the kills the result says so instead. nvmlHung: an earlier call
// hung, so NVML is not called again.
func (c *Leftover) verdict(ctx context.Context, s *survey, k kills, v2, nvmlHung bool) (check.Result, error) {
	g := s.g
	job := "job " + c.Job.JobID
	if c.Job.JobID == "" {
		job = "the job"
	}
	result := func(st check.Status, act check.Action, format string, a ...any) (check.Result, error) {
		return gpu.Result(g, st, act, format, a...), nil
	}
	if !s.listed {
		return result(check.Error, check.ActionNone, "cannot list the GPU's processes")
	}
	mode := c.Cfg.Leftover
	var kept, refused, would, gone, changed, failed, alive, stuck []held
	for _, h := range s.ours {
		switch {
		case mode != config.LeftoverKill:
			kept = append(kept, h)
		case k.refused[h.pid]:
			refused = append(refused, h)
		case k.would[h.pid]:
			would = append(would, h)
		default:
			h.kill = k.out[h.pid]
			switch h.kill.Result {
			case KillGone:
				gone = append(gone, h)
			case KillChanged:
				changed = append(changed, h)
			case KillError:
				failed = append(failed, h)
			case KillAlive:
				if k.full {
					stuck = append(stuck, h)
				} else {
					alive = append(alive, h)
				}
			}
		}
	}
	switch {
	case len(kept) > 0 && mode == config.LeftoverReport:
		return result(check.Warn, check.ActionNone, "%s after %s", describe(kept), job)
	case len(kept) > 0:
		return result(check.Fail, check.ActionDrain, "%s after %s", describe(kept), job)
	case len(stuck) > 0:
		return result(check.Fail, check.ActionDrain, "%s after %s: still there %s after SIGKILL%s",
			describe(stuck), job, roundSecs(stuck[0].kill.AfterKill), stateNote(stuck[0].kill.State))
	case len(refused) > 0:
		return result(check.Fail, check.ActionDrain, "%s after %s: not killed (root's, or not all its uids the user's)", describe(refused), job)
	case len(failed) > 0:
		return result(check.Error, check.ActionNone, "could not signal pid %d: %v%s", failed[0].pid, failed[0].kill.Err, more(failed))
	case len(s.unknown) > 0 && s.jobGPU:
		return result(check.Error, check.ActionNone, "pid %d: cannot tell whose it is: %v", s.unknown[0].pid, s.unknown[0].err)
	}

	// Memory: only on the job's GPU, and only once nothing is left on it
	// that may hold memory lawfully.
	note, unread := "", false
	used, usedOK := uint64(0), false
	switch {
	case !s.jobGPU || c.Cfg.LeftoverMemoryMiB <= 0 || len(s.foreign)+len(s.suspects)+len(s.unknown) > 0 ||
		len(would)+len(changed)+len(alive) > 0:
	case nvmlHung:
		note, unread = "; memory not read: NVML did not answer", true
	default:
		var err error
		used, usedOK, note, err = c.memory(ctx, g, v2, len(gone) > 0, k.done)
		if err != nil {
			return check.Result{}, err
		}
		unread = note == noTime
	}
	over := usedOK && used > uint64(c.Cfg.LeftoverMemoryMiB)
	switch {
	case over && mode == config.LeftoverReport:
		return result(check.Warn, check.ActionNone, "%d MiB in use after %s > %d, no process holds it", used, job, c.Cfg.LeftoverMemoryMiB)
	case over:
		return result(check.Fail, check.ActionResetGPU, "%d MiB in use after %s > %d, no process holds it", used, job, c.Cfg.LeftoverMemoryMiB)
	case len(alive) > 0:
		return result(check.Warn, check.ActionNone, "%s after %s: SIGKILL sent, not gone after %s", describe(alive), job, roundSecs(alive[0].kill.AfterKill))
	case len(changed) > 0:
		return result(check.Warn, check.ActionNone, "pid %d changed since judged (%v), not signalled%s", changed[0].pid, changed[0].kill.Err, more(changed))
	case len(would) > 0:
		return result(check.Warn, check.ActionNone, "would kill %s left by %s", describe(would), job)
	case len(s.suspects) > 0 && s.jobGPU:
		return result(check.Warn, check.ActionNone, "%s, the job user's but naming no job (maybe not %s's): reported, not killed", describe(s.suspects), job)
	case len(gone) > 0:
		return result(check.Warn, check.ActionNone, "killed %s left by %s%s", describe(gone), job, note)
	case unread:
		return result(check.Error, check.ActionNone, "no process of %s left%s", job, note)
	case usedOK:
		return result(check.OK, check.ActionNone, "nothing left by %s; %d MiB in use <= %d", job, used, c.Cfg.LeftoverMemoryMiB)
	case !s.jobGPU:
		return result(check.OK, check.ActionNone, "no process of %s (%s)", job, c.notJobs())
	}
	return result(check.OK, check.ActionNone, "no process of %s%s", job, note)
}

// notJobs says why a GPU is not judged as the job's.
func (c *Leftover) notJobs() string {
	switch c.Job.GPUScope {
	case jobenv.GPUsNone:
		return "the job had no GPU"
	case jobenv.GPUsUnknown:
		return "the job's GPUs unknown"
	}
	return "not the job's GPU"
}

// noTime is the note of a memory read the check's time did not allow.
const noTime = "; memory not read: the check's time ran out after the kills"

// memory reads the memory in use on g, then lists g's processes again:
// a process that appeared meanwhile (another job's, starting) may own
// that memory, so it is only judged with none listed. After a kill it
// waits for the driver to free the memory (up to memorySettle after
// the kills). ok false with a note says why it is not judged. ErrHung
// only for an NVML call that had time and did not answer.
func (c *Leftover) memory(ctx context.Context, g gpu.GPU, v2, killed bool, killsDone time.Time) (used uint64, ok bool, note string, err error) {
	outOfTime := func(err error) (uint64, bool, string, error) {
		if !killsDone.IsZero() {
			return 0, false, noTime, nil
		}
		return 0, false, "", err
	}
	if ctx.Err() != nil {
		return outOfTime(gpu.ErrHung)
	}
	end := killsDone.Add(memorySettle)
	for {
		used, ok, err = memUsed(ctx, g, v2)
		if err != nil {
			return outOfTime(err)
		}
		if !ok || !killed || used <= uint64(c.Cfg.LeftoverMemoryMiB) || !time.Now().Before(end) {
			break
		}
		select {
		case <-ctx.Done():
			return outOfTime(gpu.ErrHung)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if !ok {
		return 0, false, "; memory not read", nil
	}
	byPID, listed, err := listed(ctx, g)
	switch {
	case err != nil:
		return outOfTime(err)
	case !listed:
		return 0, false, "; memory not judged: the processes could not be listed again", nil
	case len(byPID) > 0:
		pids := make([]int, 0, len(byPID))
		for pid := range byPID {
			pids = append(pids, pid)
		}
		sort.Ints(pids)
		return 0, false, fmt.Sprintf("; memory not judged: pid %d on the GPU after the read", pids[0]), nil
	}
	return used, true, "", nil
}

// roundSecs shows a wait: "2.9s".
func roundSecs(d time.Duration) string { return d.Round(100 * time.Millisecond).String() }

// stateNote names a stuck process's state when it tells something.
func stateNote(state byte) string {
	if state == 'D' {
		return " (state D: stuck in the kernel)"
	}
	return ""
}

// more counts the processes after the first: " (+2 more)".
func more(hs []held) string {
	if n := len(hs) - 1; n > 0 {
		return fmt.Sprintf(" (+%d more)", n)
	}
	return ""
}

// describe names the first process and counts the rest:
// "pid 4242 (python3, uid 1001) holds 2048 MiB (+1 more)".
func describe(hs []held) string {
	h := hs[0]
	return fmt.Sprintf("pid %d (%s, uid %d) holds %d MiB", h.pid, h.proc.Comm, h.proc.UID(), h.mib) + more(hs)
}

// listed lists the compute, graphics and MPS processes on g, one entry
// per pid with its memory summed; ok false when NVML could not list
// them.
func listed(ctx context.Context, g gpu.GPU) (byPID map[int]*held, ok bool, err error) {
	d := g.Device
	byPID = map[int]*held{}
	for _, list := range []func() ([]nvml.ProcessInfo, nvml.Return){
		d.GetComputeRunningProcesses, d.GetGraphicsRunningProcesses, d.GetMPSComputeRunningProcesses,
	} {
		ps, ret, err := gpu.Call(ctx, list)
		if err != nil {
			return nil, false, err
		}
		if ret != nvml.SUCCESS {
			continue
		}
		ok = true
		for _, p := range ps {
			if p.Pid == 0 {
				continue
			}
			h := byPID[int(p.Pid)]
			if h == nil {
				h = &held{pid: int(p.Pid)}
				byPID[h.pid] = h
			}
			// NVML reports "not available" as all ones.
			if p.UsedGpuMemory != ^uint64(0) {
				h.mib += p.UsedGpuMemory >> 20
			}
		}
	}
	return byPID, ok, nil
}

// processes lists g's processes (see listed), each looked up in /proc;
// nil when NVML could not list them.
func (c *Leftover) processes(ctx context.Context, g gpu.GPU) ([]held, error) {
	byPID, ok, err := listed(ctx, g)
	if err != nil || !ok {
		return nil, err
	}
	out := []held{}
	for _, h := range byPID {
		h.proc, h.err = c.Proc(h.pid)
		out = append(out, *h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pid < out[j].pid })
	return out, nil
}

// gresIndex is the number Slurm gives g in SLURM_JOB_GPUS and the
// Epilog's CUDA_VISIBLE_DEVICES: its gres index, the GPU's place in
// slurmd's list of the node's GPUs. We take it to be the GPU's
// /dev/nvidiaN minor (NVML's index when the driver does not say), which
// holds where that list is in minor order from 0:
//   - gres.conf AutoDetect=nvml: slurmd sorts the GPUs it found by device
//     file, so index i is /dev/nvidia<i> on nodes with up to 10 GPUs and
//     minors from 0 (some Slurm releases sort the names as strings, which
//     puts /dev/nvidia10 before /dev/nvidia2 on larger nodes);
//   - one gres.conf line File=/dev/nvidia[0-7], the usual hand-written
//     form.
//
// It does not hold for gres.conf lines (one per Type=, or with Cores=)
// listed out of minor order, nor where minors skip numbers: there index
// i is the i-th File= listed. NVML's own index (PCI bus order) is no
// better: it differs from the minor on some systems (DGX A100). Where
// CUDA_VISIBLE_DEVICES holds UUIDs (MIG, or Slurm's env_uuid flag) the
// GPUs are matched by UUID instead, exactly (jobenv.Env.HasGPU).
func gresIndex(ctx context.Context, g gpu.GPU) int {
	m, ret, err := gpu.Call(ctx, g.Device.GetMinorNumber)
	if err != nil || ret != nvml.SUCCESS || m < 0 {
		return g.Index
	}
	return m
}

// memUsed is the memory in use in MiB: _v2's used, which leaves out what
// the driver reserves, where the driver has it; else the original call's,
// which counts it (about half a GiB on an H100).
func memUsed(ctx context.Context, g gpu.GPU, v2 bool) (uint64, bool, error) {
	if v2 {
		m, ret, err := gpu.Call(ctx, g.Device.GetMemoryInfo_v2)
		if err != nil {
			return 0, false, err
		}
		if ret == nvml.SUCCESS {
			return m.Used >> 20, true, nil
		}
	}
	m, ret, err := gpu.Call(ctx, g.Device.GetMemoryInfo)
	if err != nil || ret != nvml.SUCCESS {
		return 0, false, err
	}
	return m.Used >> 20, true, nil
}

// hasSymbol reports whether the loaded libnvidia-ml exports sym: calling
// a function the installed driver lacks ends the process (go-nvml binds
// lazily), so newer calls are looked up first (see gpu/memory.go). A
// mock without extensions is taken to have them all.
func hasSymbol(lib nvml.Interface, sym string) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = true
		}
	}()
	return lib.Extensions().LookupSymbol(sym) == nil
}
