package sim

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// processesPart: the GPU processes and memory use gpuhc-epilog judges
// after a job.
//
// Healthy: no compute, graphics or MPS process on any GPU, and nothing in
// use but the memory the driver sets aside (reservedMiB), which
// nvmlDeviceGetMemoryInfo counts as used and the _v2 call reports apart.
//
//	gpuN:leftover=PID       compute process PID holds 1024 MiB (repeatable)
//	gpuN:leftover=PID/MiB   ... holding MiB
//	gpuN:memused=MiB        MiB in use with no process listed: memory a
//	                        dead context did not give back
//
// The simulated node's processes are only numbers: gpuhc-epilog looks
// each PID up in <root>/proc, so a test names one there (or an e2e test a
// real process) to give it an owner.
var processesPart = part{
	name:     "processes",
	defaults: processDefaults,
	faults: map[string]func(m *Machine, d *server.Device, i int, value string) error{
		"leftover": faultLeftover,
		"memused":  faultMemUsed,
	},
}

const (
	mib = 1 << 20
	// reservedMiB is about what an H100's driver sets aside.
	reservedMiB = 512
	// leftoverMiB is what a leftover process holds unless told.
	leftoverMiB = 1024
	// maxPID is the kernel's PID_MAX_LIMIT (4M) on 64-bit.
	maxPID = 1 << 22
)

func processDefaults(m *Machine, d *server.Device, i int) {
	none := func() ([]nvml.ProcessInfo, nvml.Return) { return []nvml.ProcessInfo{}, nvml.SUCCESS }
	d.GetComputeRunningProcessesFunc = none
	d.GetGraphicsRunningProcessesFunc = none
	d.GetMPSComputeRunningProcessesFunc = none
	total := d.MemoryInfo.Total
	d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		return nvml.Memory{Total: total, Used: reservedMiB * mib, Free: total - reservedMiB*mib}, nvml.SUCCESS
	}
	d.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
		return nvml.Memory_v2{Version: nvml.STRUCT_VERSION(nvml.Memory_v2{}, 2), Total: total,
			Reserved: reservedMiB * mib, Free: total - reservedMiB*mib}, nvml.SUCCESS
	}
}

// faultLeftover: "gpuN:leftover=PID[/MiB]" — a compute process the job
// left behind, holding MiB of the GPU's memory.
func faultLeftover(m *Machine, d *server.Device, i int, value string) error {
	p, size, hasSize := strings.Cut(value, "/")
	pid, err := strconv.ParseUint(p, 10, 32)
	if err != nil || pid < 1 || pid >= maxPID {
		return fmt.Errorf("want PID[/MiB] with a PID from 1 to %d, got %q", maxPID-1, value)
	}
	used := uint64(leftoverMiB)
	if hasSize {
		if used, err = strconv.ParseUint(size, 10, 32); err != nil {
			return fmt.Errorf("want PID[/MiB] with MiB a number, got %q", value)
		}
	}
	prev := d.GetComputeRunningProcessesFunc
	d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		ps, ret := prev()
		if ret != nvml.SUCCESS {
			return ps, ret
		}
		return append(ps, nvml.ProcessInfo{Pid: uint32(pid), UsedGpuMemory: used * mib}), ret
	}
	useMemory(d, used)
	return nil
}

// faultMemUsed: "gpuN:memused=MiB" — memory in use that no process holds.
func faultMemUsed(m *Machine, d *server.Device, i int, value string) error {
	used, err := strconv.ParseUint(value, 10, 32)
	if err != nil || used == 0 {
		return fmt.Errorf("want MiB from 1, got %q", value)
	}
	useMemory(d, used)
	return nil
}

// useMemory moves MiB from free to used in both memory calls (no more
// than is free). Nothing is called here: an earlier fault may make the
// device hang.
func useMemory(d *server.Device, used uint64) {
	take := func(u, f *uint64) {
		n := min(used*mib, *f)
		*u, *f = *u+n, *f-n
	}
	v1, v2 := d.GetMemoryInfoFunc, d.GetMemoryInfo_v2Func
	d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		mem, ret := v1()
		if ret == nvml.SUCCESS {
			take(&mem.Used, &mem.Free)
		}
		return mem, ret
	}
	d.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
		mem, ret := v2()
		if ret == nvml.SUCCESS {
			take(&mem.Used, &mem.Free)
		}
		return mem, ret
	}
}
