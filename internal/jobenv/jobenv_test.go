package jobenv

import (
	"reflect"
	"strings"
	"testing"
)

func getenv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// prolog22 is what slurmd 22.05 gives a Prolog
// (docs/architecture.md#prolog-and-epilog): the node list under its old
// name.
func prolog22() map[string]string {
	return map[string]string{
		"SLURMD_NODENAME": "node1", "SLURM_JOB_ID": "1234", "SLURM_JOB_UID": "1001", "SLURM_JOB_USER": "alice",
		"SLURM_JOB_PARTITION": "gpu", "SLURM_SCRIPT_CONTEXT": "prolog_slurmd", "SLURM_NODELIST": "node1",
		"CUDA_VISIBLE_DEVICES": "0,1", "SLURM_JOB_GPUS": "0,1",
	}
}

// epilog24 is slurmd 24.11's Epilog environment: SLURM_JOB_NODELIST.
func epilog24() map[string]string {
	return map[string]string{
		"SLURMD_NODENAME": "gpu003", "SLURM_JOB_ID": "98765", "SLURM_JOB_UID": "0", "SLURM_JOB_USER": "root",
		"SLURM_JOB_PARTITION": "debug", "SLURM_SCRIPT_CONTEXT": "epilog_slurmd", "SLURM_JOB_NODELIST": "gpu[001-004]",
		"SLURM_JOB_GPUS": "3", "SPANK_GPUHC_MODE": "full",
	}
}

func with(m map[string]string, kv ...string) map[string]string {
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == "<unset>" {
			delete(m, kv[i])
		} else {
			m[kv[i]] = kv[i+1]
		}
	}
	return m
}

func TestParse(t *testing.T) {
	tests := []struct {
		name     string
		env      map[string]string
		want     Env
		problems []string // substrings, one per problem, in order
	}{
		{
			name: "22.05 prolog, SLURM_NODELIST",
			env:  prolog22(),
			want: Env{Node: "node1", JobID: "1234", UID: 1001, User: "alice", Partition: "gpu", Context: ContextProlog,
				NodeList: "node1", NodeListVar: VarNodeListOld, GPUs: []int{0, 1}, GPUScope: GPUsListed, CUDAVisible: []string{"0", "1"},
				Mode: ModeQuick, Slurm: true},
		},
		{
			name: "24.11 epilog, SLURM_JOB_NODELIST, root's job, full mode",
			env:  epilog24(),
			want: Env{Node: "gpu003", JobID: "98765", UID: 0, User: "root", Partition: "debug", Context: ContextEpilog,
				NodeList: "gpu[001-004]", NodeListVar: VarNodeList, GPUs: []int{3}, GPUScope: GPUsListed, Mode: ModeFull, Slurm: true},
		},
		{
			name: "both node lists: the current name wins",
			env:  with(epilog24(), "SLURM_NODELIST", "stale"),
			want: Env{Node: "gpu003", JobID: "98765", UID: 0, User: "root", Partition: "debug", Context: ContextEpilog,
				NodeList: "gpu[001-004]", NodeListVar: VarNodeList, GPUs: []int{3}, GPUScope: GPUsListed, Mode: ModeFull, Slurm: true},
		},
		{
			name: "by hand: nothing set",
			env:  map[string]string{},
			want: Env{UID: -1, Mode: ModeQuick},
		},
		{
			name: "no SLURM_JOB_GPUS: CUDA_VISIBLE_DEVICES indices",
			env:  with(prolog22(), "SLURM_JOB_GPUS", "<unset>", "CUDA_VISIBLE_DEVICES", "2,5"),
			want: Env{Node: "node1", JobID: "1234", UID: 1001, User: "alice", Partition: "gpu", Context: ContextProlog,
				NodeList: "node1", NodeListVar: VarNodeListOld, GPUs: []int{2, 5}, GPUScope: GPUsListed, CUDAVisible: []string{"2", "5"},
				Mode: ModeQuick, Slurm: true},
		},
		{
			name: "CUDA_VISIBLE_DEVICES as UUIDs gives no indices, but the GPUs' UUIDs",
			env: with(prolog22(), "SLURM_JOB_GPUS", "<unset>",
				"CUDA_VISIBLE_DEVICES", "GPU-0ae17990-929b-cded-9b12-b62c191c9c71,MIG-GPU-04f476b3-bcf2-c395-ecec-6916818d0222/1/0"),
			want: Env{Node: "node1", JobID: "1234", UID: 1001, User: "alice", Partition: "gpu", Context: ContextProlog,
				NodeList: "node1", NodeListVar: VarNodeListOld,
				CUDAVisible: []string{"GPU-0ae17990-929b-cded-9b12-b62c191c9c71", "MIG-GPU-04f476b3-bcf2-c395-ecec-6916818d0222/1/0"},
				GPUUUIDs:    []string{"GPU-0ae17990-929b-cded-9b12-b62c191c9c71", "GPU-04f476b3-bcf2-c395-ecec-6916818d0222"},
				GPUScope:    GPUsListed, Mode: ModeQuick, Slurm: true},
		},
		{
			name: "garbage everywhere is dropped and named",
			env: map[string]string{
				"SLURMD_NODENAME": "node 1", "SLURM_JOB_ID": "12a", "SLURM_JOB_UID": "-5", "SLURM_JOB_USER": "bob\nDRAIN",
				"SLURM_JOB_PARTITION": "gpu\x1b[2J", "SLURM_SCRIPT_CONTEXT": "task_prolog", "SLURM_JOB_NODELIST": "a b",
				"SLURM_NODELIST": "node1", "CUDA_VISIBLE_DEVICES": "0;rm -rf /", "SLURM_JOB_GPUS": "0,x",
				"SPANK_GPUHC_MODE": "fulll",
			},
			// The old node list is still taken when the new one is bad.
			want: Env{UID: -1, NodeList: "node1", NodeListVar: VarNodeListOld, GPUScope: GPUsUnknown, Mode: ModeQuick, Slurm: true},
			problems: []string{
				`SLURMD_NODENAME="node 1" is not a name`, `SLURM_JOB_ID="12a" is not a job id`, `SLURM_JOB_UID="-5" is not a uid`,
				`SLURM_JOB_USER="bob\nDRAIN" is not a name`, `SLURM_JOB_PARTITION="gpu\x1b[2J" is not a name`,
				`SLURM_SCRIPT_CONTEXT="task_prolog" is neither`, `SLURM_JOB_NODELIST="a b" is not a node list`,
				`CUDA_VISIBLE_DEVICES="0;rm -rf /" is not a list`, `SLURM_JOB_GPUS="0,x" is not a list`,
				`SPANK_GPUHC_MODE="fulll" is neither quick nor full; running quick`,
			},
		},
		{
			name: "job id 0, a uid of -1 as (uid_t) and a leading zero are refused; the GPUs are then unknown",
			env:  with(prolog22(), "SLURM_JOB_ID", "0", "SLURM_JOB_UID", "4294967295", "SLURM_JOB_GPUS", "01"),
			want: Env{Node: "node1", User: "alice", Partition: "gpu", Context: ContextProlog, UID: -1, NodeList: "node1", NodeListVar: VarNodeListOld,
				GPUScope: GPUsUnknown, CUDAVisible: []string{"0", "1"}, Mode: ModeQuick, Slurm: true},
			problems: []string{`SLURM_JOB_ID="0"`, `SLURM_JOB_UID="4294967295"`, `SLURM_JOB_GPUS="01"`},
		},
		{
			name:     "a huge job id is refused",
			env:      with(prolog22(), "SLURM_JOB_ID", strings.Repeat("9", 25)),
			want:     Env{Node: "node1", UID: 1001, User: "alice", Partition: "gpu", Context: ContextProlog, NodeList: "node1", NodeListVar: VarNodeListOld, GPUs: []int{0, 1}, GPUScope: GPUsListed, CUDAVisible: []string{"0", "1"}, Mode: ModeQuick, Slurm: true},
			problems: []string{`SLURM_JOB_ID="9999999999999999999999999"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Parse(getenv(tt.env))
			probs := got.Problems
			got.Problems = nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
			if len(probs) != len(tt.problems) {
				t.Fatalf("problems %q, want %d", probs, len(tt.problems))
			}
			for i, p := range tt.problems {
				if !strings.Contains(probs[i], p) {
					t.Errorf("problem %d: %q does not contain %q", i, probs[i], p)
				}
			}
		})
	}
}

func TestHasGPU(t *testing.T) {
	const (
		uuid2 = "GPU-0ae17990-929b-cded-9b12-b62c191c9c72"
		uuid3 = "GPU-0ae17990-929b-cded-9b12-b62c191c9c73"
	)
	// Each case asks about GPUs 2 and 3 (gres index, UUID) and wants
	// whether each is the job's, and the scope.
	tests := []struct {
		name  string
		env   map[string]string
		scope GPUScope
		want  [2]bool
	}{
		{"SLURM_JOB_GPUS=3", epilog24(), GPUsListed, [2]bool{false, true}},
		{"CUDA_VISIBLE_DEVICES indices without SLURM_JOB_GPUS", with(epilog24(), "SLURM_JOB_GPUS", "<unset>", "CUDA_VISIBLE_DEVICES", "2"),
			GPUsListed, [2]bool{true, false}},
		{"UUIDs win over indices: they name the GPU exactly", with(epilog24(), "CUDA_VISIBLE_DEVICES", strings.ToUpper(uuid2)),
			GPUsListed, [2]bool{true, false}},
		{"MIG-GPU-<uuid>/gi/ci names its GPU", with(epilog24(), "CUDA_VISIBLE_DEVICES", "MIG-"+uuid3+"/1/0"),
			GPUsListed, [2]bool{false, true}},
		{"a job without GPUs under slurmd has none", with(epilog24(), "SLURM_JOB_GPUS", "<unset>"), GPUsNone, [2]bool{}},
		{"by hand without a job: every GPU", map[string]string{}, GPUsAll, [2]bool{true, true}},
		{"a refused SLURM_JOB_GPUS: unknown, none is the job's", with(epilog24(), "SLURM_JOB_GPUS", "3;x", "CUDA_VISIBLE_DEVICES", "3"),
			GPUsUnknown, [2]bool{}},
		{"a refused CUDA_VISIBLE_DEVICES: unknown", with(epilog24(), "CUDA_VISIBLE_DEVICES", "3 4"), GPUsUnknown, [2]bool{}},
		{"NoDevFiles names no GPU: unknown", with(epilog24(), "SLURM_JOB_GPUS", "<unset>", "CUDA_VISIBLE_DEVICES", "NoDevFiles"),
			GPUsUnknown, [2]bool{}},
		{"MIG-<uuid> names no GPU: unknown", with(epilog24(), "SLURM_JOB_GPUS", "<unset>", "CUDA_VISIBLE_DEVICES", "MIG-a1b2c3d4-0000-1111-2222-333344445555"),
			GPUsUnknown, [2]bool{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := Parse(getenv(tt.env))
			got := [2]bool{e.HasGPU(2, uuid2), e.HasGPU(3, uuid3)}
			if e.GPUScope != tt.scope || got != tt.want {
				t.Errorf("scope %s, GPUs 2 and 3 the job's: %v; want %s, %v", e.GPUScope, got, tt.scope, tt.want)
			}
		})
	}
}
