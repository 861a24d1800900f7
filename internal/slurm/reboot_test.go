package slurm

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/config"
)

// The reason is one argument however it is spelled; no ASAP (22.05 would
// resume the node after the boot) and no nextstate.
func TestScontrolRebootArgv(t *testing.T) {
	f := newFakeScontrol(t)
	s := newTestScontrol(t, f)
	reason := `gpuhc: reboot: gpu3 (SN 1, 0000:4e:00.0): gpu.xid: XID 79 "$(reboot)"`
	if err := s.Reboot(t.Context(), "gpu003", reason); err != nil {
		t.Fatal(err)
	}
	if want := []string{"reboot", "Reason=" + reason, "gpu003"}; !reflect.DeepEqual(f.argv(0), want) {
		t.Errorf("argv %q, want %q", f.argv(0), want)
	}
	for _, bad := range []struct{ node, reason string }{{"gpu003 ALL", reason}, {"gpu003", ""}, {"-h", reason}} {
		if err := s.Reboot(t.Context(), bad.node, bad.reason); err == nil {
			t.Errorf("Reboot(%q, %q) accepted", bad.node, bad.reason)
		}
	}
	if f.argv(1) != nil {
		t.Errorf("a refused reboot ran scontrol: %q", f.argv(1))
	}
}

func TestClientRebootNeedsScontrol(t *testing.T) {
	f := newFakeScontrol(t)
	c, err := New(config.Slurm{Backend: BackendAuto, Scontrol: f.path, URL: "http://127.0.0.1:1", TokenFile: "/nonexistent", User: "slurm", Timeout: config.Duration{Duration: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Reboot(t.Context(), "gpu003", "gpuhc: reboot: gpu3: gpu.xid: XID 79"); err != nil {
		t.Fatal(err)
	}
	if c.Backend() != BackendScontrol || f.argv(0)[0] != "reboot" {
		t.Errorf("backend %q, argv %q: want scontrol's reboot", c.Backend(), f.argv(0))
	}
	rest, err := New(config.Slurm{Backend: BackendREST, URL: "http://127.0.0.1:1", TokenFile: "/nonexistent", User: "slurm", Timeout: config.Duration{Duration: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if err := rest.Reboot(t.Context(), "gpu003", "gpuhc: reboot: x: y: z"); !errors.Is(err, ErrNoRESTReboot) {
		t.Errorf("rest backend: %v, want ErrNoRESTReboot", err)
	}
}
