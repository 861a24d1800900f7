// Package check defines what a health check reports and runs checks
// concurrently under per-check and global deadlines.
package check

import (
	"context"
	"fmt"
	"strings"
)

// Status is the outcome for one component. The numeric order is severity,
// so the worst of several results is simply the maximum.
type Status int

const (
	// Skip means the check does not apply here (no HCAs, nothing configured).
	Skip Status = iota
	// OK means the component is healthy.
	OK
	// Warn means degraded but not worth a drain.
	Warn
	// Error means gpuhc could not check; by default it never drains.
	Error
	// Fail means the component is unhealthy.
	Fail
)

var statusNames = [...]string{Skip: "SKIP", OK: "OK", Warn: "WARN", Error: "ERROR", Fail: "FAIL"}

func (s Status) String() string {
	if s < 0 || int(s) >= len(statusNames) {
		return fmt.Sprintf("Status(%d)", int(s))
	}
	return statusNames[s]
}

// MarshalText writes the status as its upper-case name.
func (s Status) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText accepts the upper-case names (case-insensitively).
func (s *Status) UnmarshalText(b []byte) error {
	v, err := ParseStatus(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// ParseStatus reads a status name such as "FAIL" or "warn".
func ParseStatus(name string) (Status, error) {
	for i, n := range statusNames {
		if strings.EqualFold(n, name) {
			return Status(i), nil
		}
	}
	return Skip, fmt.Errorf("unknown status %q (want OK, WARN, FAIL, ERROR or SKIP)", name)
}

// Action is what the check suggests doing about a result.
type Action string

// The suggested actions (docs/architecture.md#suggested-action).
const (
	ActionNone          Action = "none"
	ActionDrain         Action = "drain"
	ActionDrainAfterJob Action = "drain-after-job"
	ActionResetGPU      Action = "reset-gpu"
	ActionReboot        Action = "reboot"
	ActionRMA           Action = "rma"
)

// IDs identify the hardware a result is about, where known.
type IDs struct {
	GPUIndex *int   `json:"gpu_index,omitempty"`
	UUID     string `json:"uuid,omitempty"`
	Serial   string `json:"serial,omitempty"`
	PCIBusID string `json:"pci_bus_id,omitempty"`
}

// Result is one check's verdict on one component ("host", "gpu3", "mlx5_2/1").
type Result struct {
	Check     string `json:"check"`
	Component string `json:"component"`
	Status    Status `json:"status"`
	Message   string `json:"message"`
	Action    Action `json:"action"`
	IDs       IDs    `json:"ids"`
	// Figures are the measured values behind the verdict, for checks that
	// measure (bandwidth): the message says them for people, these go as
	// numbers to the event log (kind "measurement") and the metrics
	// (gpuhc_measurement). Most results have none.
	Figures []Figure `json:"figures,omitempty"`
}

// Figure is one measured value, e.g. {Name: "h2d", Value: 52.4, Unit:
// "GB/s", Floor: 48}.
type Figure struct {
	// Name says what was measured, short and stable across runs: it
	// labels the metric ("h2d", "p2p", "ib_write").
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	// Floor is the least healthy value, the limit Value was judged
	// against; 0 when it was not judged (no floor known).
	Floor float64 `json:"floor,omitempty"`
}

// Check is one named health check. Run must honour ctx: the runner
// abandons a check whose context has expired, but a check that returns
// promptly leaves no goroutine behind.
type Check interface {
	Name() string
	Run(ctx context.Context) []Result
}

// Worst returns the most severe status among results (Skip when empty).
func Worst(results []Result) Status {
	w := Skip
	for _, r := range results {
		if r.Status > w {
			w = r.Status
		}
	}
	return w
}

// Ordinal writes n for a message: 3 as "3rd", 11 as "11th".
func Ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return fmt.Sprintf("%d%s", n, suffix)
}
