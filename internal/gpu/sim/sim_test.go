package sim

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

func mustNew(t *testing.T, model string, inject ...string) *Machine {
	t.Helper()
	specs, err := ParseSpecs(inject)
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(model, specs)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func cstr(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}

var uuidRE = regexp.MustCompile(`^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

func TestModelsComplete(t *testing.T) {
	for _, name := range Models() {
		mdl := models[name]
		if mdl.Name == "" || mdl.GPUName == "" || mdl.Arch == 0 || len(mdl.SerialPrefix) != 10 ||
			len(mdl.PCIBus) != 8 || mdl.PCIeMaxGen < 4 || mdl.PCIeMaxWidth != 16 || mdl.NVLinks == 0 ||
			!mdl.HasNVSwitch || mdl.NVSwitches == 0 || mdl.TempSlowdownC >= mdl.TempShutdownC ||
			mdl.TempGPUMaxC > mdl.TempSlowdownC || mdl.TempMemMaxC == 0 || mdl.PowerDefaultLimitMW == 0 ||
			mdl.PowerMinLimitMW >= mdl.PowerDefaultLimitMW || mdl.PowerMaxLimitMW < mdl.PowerDefaultLimitMW ||
			mdl.MaxSMClockMHz == 0 || mdl.MaxMemClockMHz == 0 || mdl.DriverVersion == "" || mdl.CUDAVersion == 0 {
			t.Errorf("%s: incomplete model %+v", name, mdl)
		}
		for i := 1; i < len(mdl.PCIBus); i++ {
			if mdl.PCIBus[i] <= mdl.PCIBus[i-1] {
				t.Errorf("%s: PCI buses not in NVML (PCI) order: %x", name, mdl.PCIBus)
			}
		}
	}
}

func TestIdentity(t *testing.T) {
	for _, name := range Models() {
		t.Run(name, func(t *testing.T) {
			m, again := mustNew(t, name), mustNew(t, name)
			n, _ := m.Server.DeviceGetCount()
			if n != 8 {
				t.Fatalf("count %d", n)
			}
			if v, _ := m.Server.SystemGetDriverVersion(); v != m.Model.DriverVersion {
				t.Errorf("driver %q, want %q", v, m.Model.DriverVersion)
			}
			uuids := map[string]bool{}
			for i := 0; i < n; i++ {
				d, ret := m.Server.DeviceGetHandleByIndex(i)
				if ret != nvml.SUCCESS {
					t.Fatal(ret)
				}
				uuid, _ := d.GetUUID()
				serial, _ := d.GetSerial()
				gpuName, _ := d.GetName()
				idx, _ := d.GetIndex()
				pci, _ := d.GetPciInfo()
				if !uuidRE.MatchString(uuid) || uuids[uuid] {
					t.Errorf("gpu%d: UUID %q malformed or repeated", i, uuid)
				}
				uuids[uuid] = true
				d2, _ := again.Server.DeviceGetHandleByIndex(i)
				if u2, _ := d2.GetUUID(); u2 != uuid {
					t.Errorf("gpu%d: UUID not stable: %s, %s", i, uuid, u2)
				}
				if len(serial) != 13 || serial != m.Model.Serial(i) {
					t.Errorf("gpu%d: serial %q", i, serial)
				}
				if gpuName != m.Model.GPUName || idx != i {
					t.Errorf("gpu%d: name %q index %d", i, gpuName, idx)
				}
				if got := cstr(pci.BusId[:]); got != m.Model.NVMLBusID(i) || pci.Bus != uint32(m.Model.PCIBus[i]) || pci.Domain != 0 || pci.Device != 0 {
					t.Errorf("gpu%d: PCI %q bus %x", i, got, pci.Bus)
				}
				if !strings.HasPrefix(cstr(pci.BusId[:]), "00000000:") {
					t.Errorf("gpu%d: BusId %q not in NVML's form", i, cstr(pci.BusId[:]))
				}
				for _, id := range []string{m.Model.PCIBusID(i), m.Model.NVMLBusID(i), strings.ToLower(m.Model.NVMLBusID(i))} {
					if h, ret := m.Server.DeviceGetHandleByPciBusId(id); ret != nvml.SUCCESS || h != d {
						t.Errorf("gpu%d: by PCI %q: %v", i, id, ret)
					}
				}
				if h, ret := m.Server.DeviceGetHandleByUUID(uuid); ret != nvml.SUCCESS || h != d {
					t.Errorf("gpu%d: by UUID: %v", i, ret)
				}
			}
			bus, _ := m.OnBus()
			if len(bus) != 8 || bus[0] != m.Model.PCIBusID(0) {
				t.Errorf("OnBus %v", bus)
			}
		})
	}
	if got := models["dgxh100"].PCIBusID(4); got != "0000:9a:00.0" {
		t.Errorf("DGX H100 gpu4 at %s, want 0000:9a:00.0", got)
	}
}

func TestFaultLost(t *testing.T) {
	m := mustNew(t, "dgxh100", "gpu3:lost")
	if _, ret := m.Server.DeviceGetHandleByIndex(3); ret != nvml.ERROR_GPU_IS_LOST {
		t.Errorf("handle: %v", ret)
	}
	if _, ret := m.Server.DeviceGetHandleByPciBusId("0000:5d:00.0"); ret != nvml.ERROR_GPU_IS_LOST {
		t.Errorf("handle by PCI: %v", ret)
	}
	d := m.Devices[3]
	if _, ret := d.GetUUID(); ret != nvml.ERROR_GPU_IS_LOST {
		t.Errorf("UUID: %v", ret)
	}
	if _, ret := d.GetVbiosVersion(); ret != nvml.ERROR_GPU_IS_LOST {
		t.Errorf("unset Func: %v", ret)
	}
	if n, _ := m.Server.DeviceGetCount(); n != 8 {
		t.Errorf("a lost GPU still counts: %d", n)
	}
	if _, ret := m.Server.DeviceGetHandleByIndex(4); ret != nvml.SUCCESS {
		t.Errorf("gpu4: %v", ret)
	}
}

func TestFaultLate(t *testing.T) {
	for _, tc := range []struct {
		inject string
		want   nvml.Return
	}{{"gpu2:lost=late", nvml.ERROR_GPU_IS_LOST}, {"gpu2:reset-required", nvml.ERROR_RESET_REQUIRED}} {
		m := mustNew(t, "dgxb200", tc.inject)
		d, ret := m.Server.DeviceGetHandleByIndex(2)
		if ret != nvml.SUCCESS {
			t.Fatalf("%s: handle %v", tc.inject, ret)
		}
		if s, ret := d.GetSerial(); ret != nvml.SUCCESS || s != m.Model.Serial(2) {
			t.Errorf("%s: serial %q %v", tc.inject, s, ret)
		}
		if _, ret := d.GetPersistenceMode(); ret != tc.want {
			t.Errorf("%s: persistence %v", tc.inject, ret)
		}
		if _, ret := d.GetTemperature(nvml.TEMPERATURE_GPU); ret != tc.want {
			t.Errorf("%s: temperature %v", tc.inject, ret)
		}
	}
}

func TestFaultMissing(t *testing.T) {
	m := mustNew(t, "dgxa100", "gpu4:missing")
	if n, _ := m.Server.DeviceGetCount(); n != 7 {
		t.Fatalf("count %d", n)
	}
	d, _ := m.Server.DeviceGetHandleByIndex(4)
	if s, _ := d.GetSerial(); s != m.Model.Serial(5) {
		t.Errorf("index 4 is %s, want the shifted gpu5", s)
	}
	if i, _ := d.GetIndex(); i != 4 {
		t.Errorf("shifted GPU reports index %d", i)
	}
	if _, ret := m.Server.DeviceGetHandleByIndex(7); ret == nvml.SUCCESS {
		t.Error("index 7 still answers")
	}
	if bus, _ := m.OnBus(); len(bus) != 8 || bus[4] != "0000:87:00.0" {
		t.Errorf("the bus still shows it: %v", bus)
	}
	if _, err := New("dgxa100", []Spec{{4, "missing", ""}, {4, "missing", ""}}); err == nil {
		t.Error("missing twice accepted")
	}
}

func TestFaultHang(t *testing.T) {
	blocks := func(f func()) bool {
		done := make(chan struct{})
		go func() { f(); close(done) }()
		select {
		case <-done:
			return false
		case <-time.After(50 * time.Millisecond):
			return true
		}
	}
	m := mustNew(t, "dgxh200", "gpu1:hang")
	if !blocks(func() { m.Server.DeviceGetHandleByIndex(1) }) || !blocks(func() { m.Devices[1].GetUUID() }) {
		t.Error("gpu1:hang answers")
	}
	if blocks(func() { m.Server.DeviceGetHandleByIndex(0) }) {
		t.Error("gpu0 hangs too")
	}
	late := mustNew(t, "dgxh200", "gpu1:hang=late")
	if blocks(func() { late.Devices[1].GetUUID() }) || !blocks(func() { late.Devices[1].GetPersistenceMode() }) {
		t.Error("gpu1:hang=late: identity should answer, the rest block")
	}
}

func TestFaultNVMLInit(t *testing.T) {
	m := mustNew(t, "dgxh100", "gpu0:nvml-init")
	if ret := m.Server.Init(); ret != nvml.ERROR_DRIVER_NOT_LOADED {
		t.Errorf("init %v", ret)
	}
	m = mustNew(t, "dgxh100", "gpu0:nvml-init=library-not-found")
	if ret := m.Server.Init(); ret != nvml.ERROR_LIBRARY_NOT_FOUND {
		t.Errorf("init %v", ret)
	}
}

func TestFaultErrors(t *testing.T) {
	for _, bad := range []string{"gpu8:lost", "gpu0:lost=soon", "gpu0:hang=x", "gpu0:missing=1", "gpu0:reset-required=1", "gpu0:nvml-init=bad", "gpu0:nosuch"} {
		specs, err := ParseSpecs([]string{bad})
		if err == nil {
			_, err = New("dgxh100", specs)
		}
		if err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

// A swapped GPU answers with its own serial, and only that GPU; a value
// NVML would never answer is refused.
func TestFaultSerial(t *testing.T) {
	m := mustNew(t, "dgxh100", "gpu3:serial=1654922000099")
	for i := range m.Devices {
		d, _ := m.Server.DeviceGetHandleByIndex(i)
		want := m.Model.Serial(i)
		if i == 3 {
			want = "1654922000099"
		}
		if s, ret := d.GetSerial(); ret != nvml.SUCCESS || s != want {
			t.Errorf("gpu%d: serial %q %v, want %q", i, s, ret, want)
		}
	}
	for _, bad := range []string{"gpu3:serial", "gpu3:serial=SN 1", "gpu3:serial=" + strings.Repeat("1", 31)} {
		if _, err := Build("dgxh100", []string{bad}); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestSpecsFromFile(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "inject")
	if err := os.WriteFile(f, []byte("gpu3:recovery=reset\ngpu1:xid=79, gpu2:dbe\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	specs, err := ParseSpecs([]string{"@" + f, "gpu0:lost"})
	if err != nil {
		t.Fatal(err)
	}
	want := []Spec{{3, "recovery", "reset"}, {1, "xid", "79"}, {2, "dbe", ""}, {0, "lost", ""}}
	if !reflect.DeepEqual(specs, want) {
		t.Errorf("specs %+v, want %+v", specs, want)
	}
	// The fault cleared: no file, no faults.
	if specs, err := ParseSpecs([]string{"@" + filepath.Join(dir, "gone")}); err != nil || len(specs) != 0 {
		t.Errorf("missing file: %+v, %v", specs, err)
	}
	if _, err := ParseSpecs([]string{"@" + dir}); err == nil {
		t.Error("a directory was read as faults")
	}
}
