package sim

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// nvlinkPart: link state and per-link error counters for gpu.nvlink.
//
// Healthy: links 0..Model.NVLinks-1 exist and are active, higher indexes
// answer ERROR_NOT_SUPPORTED (no such link), indexes past NVLINK_MAX_LINKS
// ERROR_INVALID_ARGUMENT, as NVML does. Every error counter reads 0, as on
// a healthy link; a fault sets a counter, so a run after a healthy one
// (with the same state directory) sees exactly that growth, and a healthy
// run after a faulty one sees a counter reset.
//
// Faults wrap the functions already set, so several compose:
//
//	gpuN:nvlink-down=L             link L inactive (exists, FEATURE_DISABLED)
//	gpuN:nvlink-crc=[L:]V          link L's (default 0) CRC flit counter reads V
//	gpuN:nvlink-replay=[L:]V       likewise the replay counter
//	gpuN:nvlink-recovery=[L:]V     likewise the recovery counter
//	gpuN:nvlink-counters=unsupported  error counters ERROR_NOT_SUPPORTED (newer drivers, B200)
//	gpuN:nvlink=unsupported        a PCIe SKU whose driver reports no link at all
//	gpuN:nvlink=inactive           every link exists, none active: a PCIe card
//	                               without an NVLink bridge (A100 PCIe, H100 PCIe)
//	gpuN:nvlink-active=K           links 0..K-1 active, the others inactive
//	                               (a bridge joining K links; 0 to the model's count)
//	gpuN:name=NAME                 nvmlDeviceGetName answers NAME, e.g.
//	                               "NVIDIA A100-PCIE-40GB": a part the checks'
//	                               table of SXM link counts does not list
//
// A PCIe card is "gpuN:name=NVIDIA A100-PCIE-40GB,gpuN:nvlink=inactive"
// (or nvlink-active=4 with a bridge).
var nvlinkPart = part{
	name:     "nvlink",
	defaults: nvlinkDefaults,
	faults: map[string]func(m *Machine, d *server.Device, i int, value string) error{
		"nvlink-down":     faultNVLinkDown,
		"nvlink-crc":      counterFault(nvml.NVLINK_ERROR_DL_CRC_FLIT),
		"nvlink-replay":   counterFault(nvml.NVLINK_ERROR_DL_REPLAY),
		"nvlink-recovery": counterFault(nvml.NVLINK_ERROR_DL_RECOVERY),
		"nvlink-counters": faultNVLinkCounters,
		"nvlink":          faultNVLink,
		"nvlink-active":   faultNVLinkActive,
		"name":            faultName,
	},
}

func nvlinkDefaults(m *Machine, d *server.Device, i int) {
	links := m.Model.NVLinks
	d.GetNvLinkStateFunc = func(l int) (nvml.EnableState, nvml.Return) {
		if ret := linkExists(l, links); ret != nvml.SUCCESS {
			return nvml.FEATURE_DISABLED, ret
		}
		return nvml.FEATURE_ENABLED, nvml.SUCCESS
	}
	d.GetNvLinkErrorCounterFunc = func(l int, c nvml.NvLinkErrorCounter) (uint64, nvml.Return) {
		if ret := linkExists(l, links); ret != nvml.SUCCESS {
			return 0, ret
		}
		if c < 0 || c >= nvml.NVLINK_ERROR_COUNT {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		return 0, nvml.SUCCESS
	}
}

// linkExists answers as NVML does for a link index on a GPU with n links.
func linkExists(l, n int) nvml.Return {
	switch {
	case l < 0 || l >= nvml.NVLINK_MAX_LINKS:
		return nvml.ERROR_INVALID_ARGUMENT
	case l >= n:
		return nvml.ERROR_NOT_SUPPORTED
	}
	return nvml.SUCCESS
}

func faultNVLinkDown(m *Machine, d *server.Device, i int, value string) error {
	l, err := linkIndex(m, value)
	if err != nil {
		return err
	}
	prev := d.GetNvLinkStateFunc
	d.GetNvLinkStateFunc = func(n int) (nvml.EnableState, nvml.Return) {
		st, ret := prev(n)
		if n == l && ret == nvml.SUCCESS {
			return nvml.FEATURE_DISABLED, ret
		}
		return st, ret
	}
	return nil
}

// counterFault sets one error counter of one link: value "V" (link 0) or
// "L:V".
func counterFault(c nvml.NvLinkErrorCounter) func(m *Machine, d *server.Device, i int, value string) error {
	return func(m *Machine, d *server.Device, i int, value string) error {
		link, count := "0", value
		if a, b, ok := strings.Cut(value, ":"); ok {
			link, count = a, b
		}
		l, err := linkIndex(m, link)
		if err != nil {
			return err
		}
		v, err := strconv.ParseUint(count, 10, 64)
		if err != nil {
			return fmt.Errorf("want [LINK:]COUNT, e.g. 3:500, got %q", value)
		}
		prev := d.GetNvLinkErrorCounterFunc
		d.GetNvLinkErrorCounterFunc = func(n int, k nvml.NvLinkErrorCounter) (uint64, nvml.Return) {
			got, ret := prev(n, k)
			if n == l && k == c && ret == nvml.SUCCESS {
				return v, ret
			}
			return got, ret
		}
		return nil
	}
}

func faultNVLinkCounters(m *Machine, d *server.Device, i int, value string) error {
	if value != "unsupported" {
		return fmt.Errorf("want unsupported, got %q", value)
	}
	d.GetNvLinkErrorCounterFunc = func(int, nvml.NvLinkErrorCounter) (uint64, nvml.Return) {
		return 0, nvml.ERROR_NOT_SUPPORTED
	}
	return nil
}

// faultNVLink "nvlink=unsupported": a PCIe SKU, on which NVML answers
// ERROR_NOT_SUPPORTED for every link. "nvlink=inactive": a PCIe card
// without a bridge, which reports every link it has, none active. The
// fabric is a separate fault (fabric=unsupported).
func faultNVLink(m *Machine, d *server.Device, i int, value string) error {
	switch value {
	case "inactive":
		return faultNVLinkActive(m, d, i, "0")
	case "unsupported":
	default:
		return fmt.Errorf("want unsupported or inactive, got %q", value)
	}
	d.GetNvLinkStateFunc = func(l int) (nvml.EnableState, nvml.Return) {
		return nvml.FEATURE_DISABLED, linkExists(l, 0)
	}
	d.GetNvLinkErrorCounterFunc = func(l int, _ nvml.NvLinkErrorCounter) (uint64, nvml.Return) {
		return 0, linkExists(l, 0)
	}
	return nil
}

// faultNVLinkActive "nvlink-active=K": links 0..K-1 stay as they were,
// the others exist but are inactive.
func faultNVLinkActive(m *Machine, d *server.Device, i int, value string) error {
	k, err := strconv.Atoi(value)
	if err != nil || k < 0 || k > m.Model.NVLinks {
		return fmt.Errorf("want a link count 0 to %d, got %q", m.Model.NVLinks, value)
	}
	prev := d.GetNvLinkStateFunc
	d.GetNvLinkStateFunc = func(n int) (nvml.EnableState, nvml.Return) {
		st, ret := prev(n)
		if n >= k && ret == nvml.SUCCESS {
			return nvml.FEATURE_DISABLED, ret
		}
		return st, ret
	}
	return nil
}

// faultName "name=NAME": the GPU's name as NVML gives it.
func faultName(m *Machine, d *server.Device, i int, value string) error {
	if value == "" {
		return fmt.Errorf("want a GPU name, e.g. %q", "NVIDIA A100-PCIE-40GB")
	}
	d.GetNameFunc = func() (string, nvml.Return) { return value, nvml.SUCCESS }
	return nil
}

func linkIndex(m *Machine, value string) (int, error) {
	l, err := strconv.Atoi(value)
	if err != nil || l < 0 || l >= m.Model.NVLinks {
		return 0, fmt.Errorf("want a link number 0 to %d, got %q", m.Model.NVLinks-1, value)
	}
	return l, nil
}
