package jobenv

import (
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// Any job environment (its user sets some of it): every value kept is one
// Slurm writes, every refused one is named in a short printable problem,
// and the GPU scope agrees with the GPUs named.
func FuzzParse(f *testing.F) {
	f.Add("gpu001", "123", "1000", "alice", "gpu", ContextProlog, "gpu[001-004]", "0,1", "0,1", ModeFull)
	f.Add("", "", "", "", "", "", "", "GPU-8a3e7a4b-1c2d-4e5f-8a9b-0c1d2e3f4a5b,MIG-GPU-8a3e7a4b/1/0", "", "")
	f.Add("a b", "007", "4294967295", "\xff", strings.Repeat("p", 300), "x", "n\n", "NoDevFiles", "-1,1024", "slow")
	f.Add("n", "18446744073709551616", "-0", "u", "p", ContextEpilog, "", "MIG-8a3e", "", "quick")
	f.Fuzz(func(t *testing.T, node, job, uid, user, part, context, list, cuda, gpus, mode string) {
		vars := map[string]string{VarNode: node, VarJobID: job, VarUID: uid, VarUser: user, VarPartition: part,
			VarContext: context, VarNodeList: list, VarCUDA: cuda, VarJobGPUs: gpus, VarMode: mode}
		e := Parse(func(k string) string { return vars[k] })
		for i, s := range []string{e.NodeList, e.Node, e.User, e.Partition} {
			if max := []int{maxList, maxName}[min(i, 1)]; s != "" && !validName(s, max) {
				t.Fatalf("kept %q: %+v", s, e)
			}
		}
		if e.JobID != "" && (e.JobID[0] == '0' || strings.Trim(e.JobID, "0123456789") != "") || e.UID < -1 || e.UID > maxUID ||
			e.UID >= 0 && strconv.Itoa(e.UID) != uid || e.Mode != ModeQuick && e.Mode != ModeFull {
			t.Fatalf("%+v", e)
		}
		for _, g := range e.GPUs {
			if g < 0 || g >= maxGPUs {
				t.Fatalf("GPU %d: %+v", g, e)
			}
		}
		if listed := e.GPUs != nil || e.GPUUUIDs != nil; listed != (e.GPUScope == GPUsListed) {
			t.Fatalf("scope %v with GPUs %v, UUIDs %v", e.GPUScope, e.GPUs, e.GPUUUIDs)
		}
		for _, p := range e.Problems {
			if len(p) > 400 || strings.ContainsFunc(p, func(r rune) bool { return !unicode.IsPrint(r) }) {
				t.Fatalf("problem %q", p)
			}
		}
	})
}
