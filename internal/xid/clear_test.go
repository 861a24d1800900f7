package xid

import (
	"testing"

	"github.com/gpuhc/gpuhc/internal/statefile"
)

func TestClearAfterReset(t *testing.T) {
	record := func() *state {
		return &state{BootID: "b1", Through: 42, GPUs: map[string]*gpuState{
			"0000:5d:00.0": {Component: "gpu3", Count: 2, Fail: &sticky{XID: 95, Action: "reset-gpu", Message: "XID 95"}},
			"0000:4e:00.0": {Component: "gpu2", Count: 1},
		}}
	}
	for _, tc := range []struct {
		name string
		pcis []string
		left []string
	}{
		{"one GPU", []string{"0000:5d:00.0"}, []string{"0000:4e:00.0"}},
		{"one GPU, any spelling", []string{"00000000:5D:00.0"}, []string{"0000:4e:00.0"}},
		{"every GPU (reset_all)", nil, nil},
		{"a GPU with no entry", []string{"0000:99:00.0"}, []string{"0000:4e:00.0", "0000:5d:00.0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := statefile.Dir{Path: t.TempDir()}
			if err := dir.Save(stateFile, record()); err != nil {
				t.Fatal(err)
			}
			if err := ClearAfterReset(dir, tc.pcis); err != nil {
				t.Fatal(err)
			}
			var got state
			if err := dir.Load(stateFile, &got); err != nil {
				t.Fatal(err)
			}
			if got.BootID != "b1" || got.Through != 42 {
				t.Errorf("boot and position changed: %+v", got)
			}
			if len(got.GPUs) != len(tc.left) {
				t.Fatalf("left %v, want %v", got.GPUs, tc.left)
			}
			for _, p := range tc.left {
				if got.GPUs[p] == nil {
					t.Errorf("%s cleared", p)
				}
			}
		})
	}
	if err := ClearAfterReset(statefile.Dir{Path: t.TempDir()}, nil); err != nil {
		t.Errorf("no record: %v", err)
	}
}
