package gpu

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// baseFakeLib is a bare go-nvml mock with n GPUs, for the node-level paths
// the simulator does not reach. init, when set, is what nvmlInit answers.
func baseFakeLib(n int, init func() nvml.Return) *mock.Interface {
	devs := make([]nvml.Device, n)
	for i := range devs {
		i := i
		var pci nvml.PciInfo
		for j, c := range fmt.Sprintf("00000000:%02X:00.0", 0x18+i) {
			pci.BusId[j] = int8(c)
		}
		devs[i] = &mock.Device{
			GetUUIDFunc:            func() (string, nvml.Return) { return fmt.Sprintf("GPU-%d", i), nvml.SUCCESS },
			GetSerialFunc:          func() (string, nvml.Return) { return fmt.Sprintf("S%d", i), nvml.SUCCESS },
			GetNameFunc:            func() (string, nvml.Return) { return "NVIDIA H100 80GB HBM3", nvml.SUCCESS },
			GetPciInfoFunc:         func() (nvml.PciInfo, nvml.Return) { return pci, nvml.SUCCESS },
			GetPersistenceModeFunc: func() (nvml.EnableState, nvml.Return) { return nvml.FEATURE_ENABLED, nvml.SUCCESS },
		}
	}
	if init == nil {
		init = func() nvml.Return { return nvml.SUCCESS }
	}
	return &mock.Interface{
		InitFunc:                   init,
		SystemGetDriverVersionFunc: func() (string, nvml.Return) { return "550.54.15", nvml.SUCCESS },
		DeviceGetCountFunc:         func() (int, nvml.Return) { return len(devs), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			if i < 0 || i >= len(devs) {
				return nil, nvml.ERROR_INVALID_ARGUMENT
			}
			return devs[i], nvml.SUCCESS
		},
	}
}

func failInit(ret nvml.Return) func() nvml.Return { return func() nvml.Return { return ret } }

func TestInventory(t *testing.T) {
	n := NewNode(baseFakeLib(2, nil), t.TempDir(), -1, "")
	inv, err := n.Inventory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if inv.Driver != "550.54.15" || len(inv.GPUs) != 2 || len(inv.Lost) != 0 {
		t.Fatalf("%+v", inv)
	}
	g := inv.GPUs[1]
	if g.Index != 1 || g.UUID != "GPU-1" || g.Serial != "S1" || g.PCIBusID != "0000:19:00.0" || g.Component() != "gpu1" {
		t.Errorf("%+v", g)
	}
	if ids := g.IDs(); *ids.GPUIndex != 1 || ids.PCIBusID != "0000:19:00.0" {
		t.Errorf("IDs %+v", ids)
	}
	if got, ok := inv.ByPCI("00000000:19:00.0"); !ok || got.Index != 1 {
		t.Errorf("ByPCI: %+v %v", got, ok)
	}
	if _, ok := inv.ByPCI("0000:99:00.0"); ok {
		t.Error("ByPCI found a GPU that is not there")
	}
}

func TestInventoryOnce(t *testing.T) {
	var inits atomic.Int32
	lib := baseFakeLib(8, func() nvml.Return { inits.Add(1); time.Sleep(10 * time.Millisecond); return nvml.SUCCESS })
	n := NewNode(lib, t.TempDir(), -1, "")
	var wg sync.WaitGroup
	invs := make([]*Inventory, 10)
	for i := range invs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			invs[i], _ = n.Inventory(context.Background())
		}()
	}
	wg.Wait()
	if inits.Load() != 1 {
		t.Errorf("nvmlInit called %d times", inits.Load())
	}
	for _, inv := range invs {
		if inv != invs[0] || len(inv.GPUs) != 8 {
			t.Fatal("callers got different inventories")
		}
	}
}

func TestInventoryNoGPUs(t *testing.T) {
	root := t.TempDir()
	basePCIDevice(t, root, "pci0000:00", "0000:00:00.0", "0x8086", "0x060000")
	for _, expected := range []int{-1, 0} {
		n := NewNode(baseFakeLib(0, failInit(nvml.ERROR_LIBRARY_NOT_FOUND)), root, expected, "")
		if _, err := n.Inventory(context.Background()); !errors.Is(err, ErrNoGPUs) {
			t.Errorf("expected %d: err %v, want ErrNoGPUs", expected, err)
		}
	}
	// NVML works but sees nothing, and nothing is on the bus.
	n := NewNode(baseFakeLib(0, nil), root, -1, "")
	if _, err := n.Inventory(context.Background()); !errors.Is(err, ErrNoGPUs) {
		t.Errorf("NVML with no GPUs: %v", err)
	}
}

func TestInventoryNVMLError(t *testing.T) {
	withGPU := t.TempDir()
	basePCIDevice(t, withGPU, "pci0000:17", "0000:18:00.0", "0x10de", "0x030200")
	for _, tc := range []struct {
		name     string
		root     string
		expected int
		sim      string
	}{
		{"GPU on the bus", withGPU, -1, ""},
		{"GPUs expected", t.TempDir(), 8, ""},
		{"simulated", t.TempDir(), -1, "dgxh100"},
	} {
		n := NewNode(baseFakeLib(1, failInit(nvml.ERROR_DRIVER_NOT_LOADED)), tc.root, tc.expected, tc.sim)
		_, err := n.Inventory(context.Background())
		var ne *NVMLError
		if !errors.As(err, &ne) || ne.Op != "nvmlInit" || ne.Ret != nvml.ERROR_DRIVER_NOT_LOADED {
			t.Errorf("%s: err %v, want nvmlInit's", tc.name, err)
		}
	}
}

func TestInventoryHung(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	n := NewNode(baseFakeLib(1, func() nvml.Return { <-block; return nvml.SUCCESS }), t.TempDir(), -1, "")
	for i := 0; i < 2; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
		_, err := n.Inventory(ctx)
		cancel()
		if !errors.Is(err, ErrHung) {
			t.Errorf("call %d: err %v, want ErrHung", i, err)
		}
	}
}

func TestInventoryLostAndBus(t *testing.T) {
	lib := baseFakeLib(3, nil)
	lib.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i == 1 {
			return nil, nvml.ERROR_GPU_IS_LOST
		}
		return baseFakeLib(3, nil).DeviceGetHandleByIndex(i)
	}
	bus := []string{"0000:18:00.0", "0000:19:00.0", "0000:1a:00.0"}
	n := NewNode(lib, "/nonexistent", -1, "sim", WithBus(func() ([]string, error) { return bus, nil }))
	inv, err := n.Inventory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ne *NVMLError
	if len(inv.GPUs) != 2 || !errors.As(inv.Lost[1], &ne) || ne.Ret != nvml.ERROR_GPU_IS_LOST || len(inv.OnBus) != 3 {
		t.Errorf("%+v", inv)
	}
	if n.Expected() != -1 {
		t.Error("Expected")
	}
}
