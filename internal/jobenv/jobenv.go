// Package jobenv reads the environment slurmd gives its Prolog and Epilog
// (docs/architecture.md#prolog-and-epilog): who the job is, where it runs,
// which GPUs it has and which mode of the prolog its submitter asked for.
// Every value is validated: one that is not what Slurm writes is dropped
// (left unknown) and named in Env.Problems, never passed on into a reason,
// a path or a kill.
package jobenv

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// The variables, as Slurm 22.05 to 25.11 set them.
const (
	VarNode      = "SLURMD_NODENAME"
	VarJobID     = "SLURM_JOB_ID"
	VarUID       = "SLURM_JOB_UID"
	VarUser      = "SLURM_JOB_USER"
	VarPartition = "SLURM_JOB_PARTITION"
	VarContext   = "SLURM_SCRIPT_CONTEXT"
	// VarNodeList is the job's node list from Slurm 23.11 on;
	// VarNodeListOld is its name up to 23.02 (22.05 sets only it).
	VarNodeList    = "SLURM_JOB_NODELIST"
	VarNodeListOld = "SLURM_NODELIST"
	VarCUDA        = "CUDA_VISIBLE_DEVICES"
	VarJobGPUs     = "SLURM_JOB_GPUS"
	// VarMode is set by gpuhc's SPANK plugin from --gpu-health=quick|full
	// (spank_job_control_setenv "GPUHC_MODE"; Slurm adds "SPANK_").
	VarMode = "SPANK_GPUHC_MODE"
)

// Script contexts (SLURM_SCRIPT_CONTEXT).
const (
	ContextProlog = "prolog_slurmd"
	ContextEpilog = "epilog_slurmd"
)

// Prolog modes.
const (
	ModeQuick = "quick"
	ModeFull  = "full"
)

// Env is a job's environment as validated. A field Slurm did not set, or
// set to something invalid, is empty (UID: -1).
type Env struct {
	Node      string
	JobID     string
	UID       int
	User      string
	Partition string
	// Context is SLURM_SCRIPT_CONTEXT: prolog_slurmd or epilog_slurmd
	// when slurmd runs us, empty by hand.
	Context string
	// NodeList is the job's nodes as a hostlist expression, and
	// NodeListVar the variable it came from.
	NodeList    string
	NodeListVar string
	// GPUs are the job's GPUs as SLURM_JOB_GPUS gives them (Slurm's gres
	// indices of the node's GPUs, see GPUScope), or, without it,
	// CUDA_VISIBLE_DEVICES when that holds indices; nil when the job has
	// none or they are unknown.
	GPUs []int
	// GPUUUIDs are the job's GPUs as CUDA_VISIBLE_DEVICES names them by
	// UUID ("GPU-..."; a MIG device by its parent GPU's), when every item
	// does; nil otherwise.
	GPUUUIDs []string
	// GPUScope says what GPUs and GPUUUIDs are worth: see the constants.
	GPUScope GPUScope
	// CUDAVisible is CUDA_VISIBLE_DEVICES as set: indices, or GPU-/MIG-
	// UUIDs.
	CUDAVisible []string
	// Mode is SPANK_GPUHC_MODE: quick (also when unset) or full.
	Mode string
	// Problems name each value that was refused, for the log.
	Problems []string
	// Slurm is true when slurmd runs us: SLURM_SCRIPT_CONTEXT or
	// SLURM_JOB_ID is set, whatever their values.
	Slurm bool
}

// Limits on what is accepted: Slurm's own names are far shorter.
const (
	maxName  = 256
	maxList  = 4096
	maxGPUs  = 1024
	maxJobID = 20 // digits in a uint64
	// maxUID is the largest valid uid (4294967295 is (uid_t)-1, "none").
	maxUID = 1<<32 - 2
)

// Parse reads the environment through getenv (os.Getenv in main).
func Parse(getenv func(string) string) Env {
	e := Env{UID: -1, Slurm: getenv(VarContext) != "" || getenv(VarJobID) != ""}
	e.Node = e.name(getenv, VarNode)
	if v := getenv(VarJobID); v != "" {
		if validJobID(v) {
			e.JobID = v
		} else {
			e.problem(VarJobID, v, "is not a job id (digits)")
		}
	}
	if v := getenv(VarUID); v != "" {
		if n, err := strconv.ParseUint(v, 10, 32); err == nil && n <= maxUID && v == strconv.FormatUint(n, 10) {
			e.UID = int(n)
		} else {
			e.problem(VarUID, v, "is not a uid")
		}
	}
	e.User = e.name(getenv, VarUser)
	e.Partition = e.name(getenv, VarPartition)
	switch v := getenv(VarContext); v {
	case "", ContextProlog, ContextEpilog:
		e.Context = v
	default:
		e.problem(VarContext, v, "is neither "+ContextProlog+" nor "+ContextEpilog)
	}
	e.nodeList(getenv)
	e.gpus(getenv)
	switch v := getenv(VarMode); v {
	case "", ModeQuick:
		e.Mode = ModeQuick
	case ModeFull:
		e.Mode = ModeFull
	default:
		// The SPANK plugin refuses other values at submission; one that
		// got here anyway must not cost the job its start.
		e.Mode = ModeQuick
		e.problem(VarMode, v, "is neither quick nor full; running quick")
	}
	return e
}

func (e *Env) problem(name, value, why string) {
	e.Problems = append(e.Problems, fmt.Sprintf("%s=%s %s", name, quote(value), why))
}

// quote shows a refused value safely: Go syntax, cut short.
func quote(v string) string {
	if len(v) > 64 {
		return strconv.Quote(v[:64]) + "..."
	}
	return strconv.Quote(v)
}

// name reads a printable, space-free value (node, user, partition).
func (e *Env) name(getenv func(string) string, key string) string {
	v := getenv(key)
	if v == "" {
		return ""
	}
	if !validName(v, maxName) {
		e.problem(key, v, "is not a name (printable, no spaces, at most 256 bytes)")
		return ""
	}
	return v
}

// nodeList prefers the current name; 22.05 has only the old one.
func (e *Env) nodeList(getenv func(string) string) {
	for _, key := range []string{VarNodeList, VarNodeListOld} {
		v := getenv(key)
		if v == "" {
			continue
		}
		if !validName(v, maxList) {
			e.problem(key, v, "is not a node list")
			continue
		}
		e.NodeList, e.NodeListVar = v, key
		return
	}
}

// GPUScope says how much is known of the job's GPUs.
type GPUScope int

const (
	// GPUsAll: no job (run by hand: neither SLURM_SCRIPT_CONTEXT nor
	// SLURM_JOB_ID) and no GPU variable; every GPU counts as the job's.
	GPUsAll GPUScope = iota
	// GPUsListed: GPUUUIDs or GPUs name the job's GPUs.
	GPUsListed
	// GPUsNone: slurmd ran us and set neither SLURM_JOB_GPUS nor
	// CUDA_VISIBLE_DEVICES, which it sets whenever the job has a GPU: the
	// job had none, and no GPU is its.
	GPUsNone
	// GPUsUnknown: a GPU variable was set but was refused, or names no GPU
	// we can find (Slurm's "NoDevFiles", a "MIG-<uuid>"): no GPU can be
	// called the job's, nor can every one.
	GPUsUnknown
)

func (s GPUScope) String() string {
	switch s {
	case GPUsAll:
		return "all (no job)"
	case GPUsListed:
		return "listed"
	case GPUsNone:
		return "none"
	}
	return "unknown"
}

func (e *Env) gpus(getenv func(string) string) {
	cuda, jobGPUs := getenv(VarCUDA), getenv(VarJobGPUs)
	refused := false
	if cuda != "" {
		if ids, ok := splitIDs(cuda); ok {
			e.CUDAVisible = ids
			e.GPUUUIDs = uuids(ids)
		} else {
			e.problem(VarCUDA, cuda, "is not a list of GPU indices or UUIDs")
			refused = true
		}
	}
	if jobGPUs != "" {
		if gpus, ok := indices(strings.Split(jobGPUs, ",")); ok {
			e.GPUs = gpus
		} else {
			e.problem(VarJobGPUs, jobGPUs, "is not a list of GPU indices")
			refused = true
		}
	} else if gpus, ok := indices(e.CUDAVisible); ok && len(gpus) > 0 {
		// Without SLURM_JOB_GPUS (older Slurm), the prolog's
		// CUDA_VISIBLE_DEVICES holds the same gres indices.
		e.GPUs = gpus
	}
	switch {
	case cuda == "" && jobGPUs == "" && e.Slurm:
		e.GPUScope = GPUsNone
	case cuda == "" && jobGPUs == "":
		e.GPUScope = GPUsAll
	case refused:
		// Whatever the other variable says, an environment we do not
		// understand names no GPU for sure.
		e.GPUs, e.GPUUUIDs, e.GPUScope = nil, nil, GPUsUnknown
	case e.GPUs != nil || e.GPUUUIDs != nil:
		e.GPUScope = GPUsListed
	default:
		e.GPUScope = GPUsUnknown
	}
}

// uuids are the GPUs' UUIDs when every item names one: "GPU-<uuid>", or
// a MIG device in the "MIG-GPU-<uuid>/<gi>/<ci>" form, which names its
// GPU. The later "MIG-<uuid>" form names only the MIG device: nil.
func uuids(items []string) []string {
	var out []string
	for _, s := range items {
		if rest, ok := strings.CutPrefix(s, "MIG-"); ok {
			s, _, ok = strings.Cut(rest, "/")
			if !ok {
				return nil
			}
		}
		u, ok := strings.CutPrefix(s, "GPU-")
		if !ok || u == "" || strings.ContainsFunc(u, func(r rune) bool { return !(r == '-' || unicode.Is(unicode.ASCII_Hex_Digit, r)) }) {
			return nil
		}
		out = append(out, s)
	}
	return out
}

// indices parses "0,1,7"; false if any item is not an index or there are
// too many.
func indices(items []string) ([]int, bool) {
	if len(items) > maxGPUs {
		return nil, false
	}
	var out []int
	for _, s := range items {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n >= maxGPUs || s != strconv.Itoa(n) {
			return nil, false
		}
		out = append(out, n)
	}
	return out, true
}

// splitIDs accepts CUDA_VISIBLE_DEVICES's forms: "0,1", "GPU-<uuid>",
// "MIG-<uuid>", "MIG-GPU-<uuid>/1/0", and Slurm's "NoDevFiles".
func splitIDs(v string) ([]string, bool) {
	if len(v) > maxList {
		return nil, false
	}
	items := strings.Split(v, ",")
	for _, s := range items {
		if s == "" || strings.ContainsFunc(s, func(r rune) bool {
			return !(r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("-_/:.", r)))
		}) {
			return nil, false
		}
	}
	return items, true
}

func validJobID(v string) bool {
	if len(v) > maxJobID {
		return false
	}
	n, err := strconv.ParseUint(v, 10, 64)
	return err == nil && n > 0 && v == strconv.FormatUint(n, 10)
}

// validName: printable, no spaces (so it is one field in a log line and
// a reason), not empty, and not too long.
func validName(v string, max int) bool {
	if v == "" || len(v) > max {
		return false
	}
	for _, r := range v {
		if r == unicode.ReplacementChar || !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return false
		}
	}
	return true
}

// HasGPU reports whether the GPU with gres index index and UUID uuid
// was given to the job: by UUID where CUDA_VISIBLE_DEVICES names UUIDs
// (exact), else by index; every GPU when run by hand without a job; none
// when the job had none or its GPUs are unknown (see GPUScope).
//
// index must be the GPU's Slurm gres index, which is what SLURM_JOB_GPUS
// and the Prolog's and Epilog's CUDA_VISIBLE_DEVICES hold (Slurm's
// gres_common_prep_set_env writes gres_device->index): the GPU's place
// in slurmd's list of the node's GPUs. The caller decides how a GPU maps
// to it (see epilog's gresIndex).
func (e Env) HasGPU(index int, uuid string) bool {
	switch e.GPUScope {
	case GPUsAll:
		return true
	case GPUsListed:
	default:
		return false
	}
	if e.GPUUUIDs != nil {
		return uuid != "" && slices.ContainsFunc(e.GPUUUIDs, func(u string) bool { return strings.EqualFold(u, uuid) })
	}
	return slices.Contains(e.GPUs, index)
}
