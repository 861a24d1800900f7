package epilog

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/gpu"
	"github.com/gpuhc/gpuhc/internal/jobenv"
)

// LeftoverName is the check's name in results and reasons.
const LeftoverName = "job.leftover"

// Leftover judges what a job left on the GPUs: processes of the job's
// user still holding a GPU, and GPU memory not given back.
//
// A process is the job's when its uid is the job's and its cgroup or
// environment does not name another job (the same user may have another
// job on the node); a root process only when its cgroup or environment
// names this job, since root also runs the node's daemons. Other users'
// processes and other jobs' are never the job's: they are not judged,
// and their GPUs' memory is not either.
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
}

// Run implements check.Check: one result per GPU.
func (c *Leftover) Run(ctx context.Context) []check.Result {
	ctx, cancel := check.FinishEarly(ctx)
	defer cancel()
	start := time.Now()
	if c.Job.UID < 0 {
		return []check.Result{{Component: "host", Status: check.Skip, Message: "job uid unknown (no valid SLURM_JOB_UID): leftovers not judged"}}
	}
	inv, err := c.Node.Inventory(ctx)
	if err != nil {
		return []check.Result{gpu.NodeResult(err, start)}
	}
	v2 := hasSymbol(c.Node.Lib(), "nvmlDeviceGetMemoryInfo_v2")
	var out []check.Result
	for _, g := range inv.GPUs {
		r, err := c.judge(ctx, g, v2)
		if errors.Is(err, gpu.ErrHung) {
			out = append(out, gpu.Hung(g.Component(), g.IDs(), start))
			break
		}
		out = append(out, r)
	}
	if c.Node.Simulated != "" {
		for i := range out {
			out[i].Message += " [simulated]"
		}
	}
	return out
}

func (c *Leftover) judge(ctx context.Context, g gpu.GPU, v2 bool) (check.Result, error) {
	procs, err := c.processes(ctx, g)
	if err != nil {
		return check.Result{}, err
	}
	if procs == nil {
		return gpu.Result(g, check.Error, check.ActionNone, "cannot list the GPU's processes"), nil
	}
	var mine, foreign, unknown []held
	for _, h := range procs {
		switch {
		case errors.Is(h.err, errGone):
			// Ended since NVML listed it.
		case h.err != nil:
			// Unknown owner: neither killed nor counted as the job's, and
			// the GPU is not free either.
			unknown = append(unknown, h)
		case c.jobs(h.proc):
			mine = append(mine, h)
		default:
			foreign = append(foreign, h)
		}
	}
	mode := c.Cfg.Leftover
	var k kills
	if len(mine) > 0 && mode == config.LeftoverKill {
		k = c.kill(ctx, mine)
	}
	if len(mine) == 0 && len(unknown) > 0 {
		return gpu.Result(g, check.Error, check.ActionNone, "pid %d: cannot tell whose it is: %v", unknown[0].pid, unknown[0].err), nil
	}
	jobGPU := c.Job.HasGPU(minor(ctx, g))
	used, usedOK := int64(-1), false
	if jobGPU && c.Cfg.LeftoverMemoryMiB > 0 && len(foreign) == 0 && len(unknown) == 0 {
		u, ok, err := c.settledMemory(ctx, g, v2, len(k.killed) > 0)
		if err != nil {
			return check.Result{}, err
		}
		used, usedOK = int64(u), ok
	}
	return c.verdict(g, mode, mine, k, used, usedOK, jobGPU), nil
}

// memorySettle is how long the driver is given to free the memory of
// processes just killed.
const memorySettle = time.Second

// settledMemory reads the memory in use; after a kill, again until it is
// at most the threshold or memorySettle has passed.
func (c *Leftover) settledMemory(ctx context.Context, g gpu.GPU, v2, killed bool) (uint64, bool, error) {
	end := time.Now().Add(memorySettle)
	for {
		u, ok, err := memUsed(ctx, g, v2)
		if err != nil || !ok || !killed || u <= uint64(c.Cfg.LeftoverMemoryMiB) || time.Now().After(end) {
			return u, ok, err
		}
		select {
		case <-ctx.Done():
			return u, ok, nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// jobs reports whether a process belongs to this job (see Leftover).
func (c *Leftover) jobs(p Proc) bool {
	if p.UID() != c.Job.UID {
		return false
	}
	switch {
	case p.JobID == c.Job.JobID && p.JobID != "":
		return true
	case p.JobID != "":
		return false // another job of the same user
	}
	return p.UID() != 0
}

// kills is what "kill" did with the job's processes.
type kills struct {
	// killed are gone; survived outlived SIGKILL or could not be
	// signalled; refused are never signalled (root's, or a setuid
	// program's); would are what a run without a killer (a dry run, a
	// simulation) would have signalled.
	killed, survived, refused, would []held
}

func (c *Leftover) kill(ctx context.Context, mine []held) kills {
	var k kills
	for _, h := range mine {
		switch {
		case h.proc.UID() == 0 || !h.proc.OwnedBy(c.Job.UID):
			k.refused = append(k.refused, h)
			continue
		case c.Kill == nil:
			k.would = append(k.would, h)
			continue
		}
		gone, err := c.Kill.Kill(ctx, h.pid, c.Job.UID, c.Cfg.KillGrace.Duration)
		switch {
		case gone:
			k.killed = append(k.killed, h)
		case errors.Is(err, errNotOwner):
			// The pid was reused by someone else's process: not ours.
		default:
			h.err = err
			k.survived = append(k.survived, h)
		}
	}
	return k
}

func (c *Leftover) verdict(g gpu.GPU, mode string, mine []held, k kills, used int64, usedOK, jobGPU bool) check.Result {
	job := "job " + c.Job.JobID
	if c.Job.JobID == "" {
		job = "the job"
	}
	fail := func(act check.Action, format string, a ...any) check.Result {
		return gpu.Result(g, check.Fail, act, format, a...)
	}
	warn := func(format string, a ...any) check.Result {
		return gpu.Result(g, check.Warn, check.ActionNone, format, a...)
	}
	switch {
	case len(mine) == 0:
	case mode == config.LeftoverReport:
		return warn("%s after %s", describe(mine), job)
	case mode == config.LeftoverDrain:
		return fail(check.ActionDrain, "%s after %s", describe(mine), job)
	case len(k.survived) > 0:
		return fail(check.ActionDrain, "%s after %s: still there after SIGKILL", describe(k.survived), job)
	case len(k.refused) > 0:
		return fail(check.ActionDrain, "%s after %s: not killed (root's, or not all its uids the user's)", describe(k.refused), job)
	case len(k.would) > 0:
		return warn("would kill %s left by %s", describe(k.would), job)
	}
	over := usedOK && c.Cfg.LeftoverMemoryMiB > 0 && used > int64(c.Cfg.LeftoverMemoryMiB)
	switch {
	case over && mode == config.LeftoverReport:
		return warn("%d MiB in use after %s > %d, no process holds it", used, job, c.Cfg.LeftoverMemoryMiB)
	case over:
		return fail(check.ActionResetGPU, "%d MiB in use after %s > %d, no process holds it", used, job, c.Cfg.LeftoverMemoryMiB)
	case len(k.killed) > 0:
		return warn("killed %s left by %s", describe(k.killed), job)
	case usedOK:
		return gpu.Result(g, check.OK, check.ActionNone, "nothing left by %s; %d MiB in use <= %d", job, used, c.Cfg.LeftoverMemoryMiB)
	case !jobGPU:
		return gpu.Result(g, check.OK, check.ActionNone, "no process of %s (not the job's GPU)", job)
	}
	return gpu.Result(g, check.OK, check.ActionNone, "no process of %s", job)
}

// describe names the first process and counts the rest:
// "pid 4242 (python3, uid 1001) holds 2048 MiB (+1 more)".
func describe(hs []held) string {
	h := hs[0]
	s := fmt.Sprintf("pid %d (%s, uid %d) holds %d MiB", h.pid, h.proc.Comm, h.proc.UID(), h.mib)
	if n := len(hs) - 1; n > 0 {
		s += fmt.Sprintf(" (+%d more)", n)
	}
	return s
}

// processes lists the compute, graphics and MPS processes on g, one
// entry per pid with its memory summed, each looked up in /proc; nil
// when NVML could not list them.
func (c *Leftover) processes(ctx context.Context, g gpu.GPU) ([]held, error) {
	d := g.Device
	byPID := map[int]*held{}
	answered := false
	for _, list := range []func() ([]nvml.ProcessInfo, nvml.Return){
		d.GetComputeRunningProcesses, d.GetGraphicsRunningProcesses, d.GetMPSComputeRunningProcesses,
	} {
		ps, ret, err := gpu.Call(ctx, list)
		if err != nil {
			return nil, err
		}
		if ret != nvml.SUCCESS {
			continue
		}
		answered = true
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
	if !answered {
		return nil, nil
	}
	out := []held{}
	for _, h := range byPID {
		h.proc, h.err = c.Proc(h.pid)
		out = append(out, *h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pid < out[j].pid })
	return out, nil
}

// minor is the GPU's /dev/nvidiaN number, which is what Slurm's global
// GPU indices (SLURM_JOB_GPUS, from gres.conf's File=/dev/nvidia[0-7])
// count; NVML's index when the driver does not say.
func minor(ctx context.Context, g gpu.GPU) int {
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
