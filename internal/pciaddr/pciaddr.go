// Package pciaddr writes PCI addresses the one way gpuhc compares them:
// as sysfs names devices ("0000:18:00.0"). NVML, CUDA and the kernel log
// each write them differently, and the checks that join GPUs to HCAs and
// to kernel-log lines must agree. Pure Go, so packages built without cgo
// (the bandwidth tools' side, the config) share it.
package pciaddr

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gpuhc/gpuhc/internal/lazyre"
)

// sysfsName is a PCI function as sysfs names its device directory: lower
// case, a domain of 4 hex digits or more (VMD domains have 5), bus,
// device, function.
var sysfsName = lazyre.New(`^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)

// LogPattern is a PCI address as drivers write it in kernel log lines,
// for use inside a regular expression: any case, a domain of 4 to 8 hex
// digits (VMD domains have 5, NVML pads to 8), the function optional
// ("0000:4e:00", "10000:01:00.0"). Normalize turns a match into the
// sysfs name.
const LogPattern = `[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?`

// IsSysfs reports whether s names a PCI function exactly as sysfs does
// ("0000:18:00.0"); text read from sysfs must pass it before it is used
// as an address or in a path.
func IsSysfs(s string) bool { return sysfsName.MatchString(s) }

// Normalize turns "00000000:4E:00.0" (NVML, CUDA), "0000:4e:00" or
// "4e:00.0" into "0000:4e:00.0": lower case, the domain with at least 4
// hex digits and a function. A domain above 0xffff (Intel VMD) keeps its
// digits as sysfs writes it: "00010000:01:00.0" is "10000:01:00.0". Text
// that is not an address comes back lower-cased and otherwise as it was,
// so that callers still reject it.
func Normalize(addr string) string {
	a := strings.ToLower(strings.TrimSpace(addr))
	if strings.Count(a, ":") == 1 {
		a = "0000:" + a
	}
	if dom, rest, ok := strings.Cut(a, ":"); ok && len(dom) >= 1 && len(dom) <= 8 && strings.Count(rest, ":") == 1 {
		if d, err := strconv.ParseUint(dom, 16, 32); err == nil {
			a = fmt.Sprintf("%04x:%s", d, rest)
		}
	}
	if !strings.Contains(a, ".") {
		a += ".0"
	}
	return a
}
