package gpu

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
)

// driver is gpu.driver: NVML loads and initialises, and the driver is the
// version the site wants. It is the one gpu check that FAILs a node whose
// NVML does not work; the others report ERROR and point here.
type driver struct {
	n *Node
	c config.GPUDriver
}

// NewDriver builds gpu.driver.
func NewDriver(n *Node, c config.GPUDriver) check.Check { return driver{n, c} }

func (driver) Name() string { return "gpu.driver" }

func (c driver) Run(ctx context.Context) []check.Result {
	ctx, cancel := check.FinishEarly(ctx)
	defer cancel()
	start := time.Now()
	inv, err := c.n.Inventory(ctx)
	var ne *NVMLError
	switch {
	case errors.As(err, &ne):
		return []check.Result{{Component: "host", Status: check.Fail, Action: check.ActionDrain,
			Message: fmt.Sprintf("NVML failed (%s): %v", onBus(inv), err)}}
	case err != nil:
		return []check.Result{NodeResult(err, start)}
	}
	return []check.Result{c.version(inv.Driver)}
}

func onBus(inv *Inventory) string {
	if inv == nil || len(inv.OnBus) == 0 {
		return "NVIDIA GPUs expected"
	}
	return gpus(len(inv.OnBus)) + " on the PCI bus"
}

func (c driver) version(v string) check.Result {
	r := check.Result{Component: "host", Status: check.OK, Message: "driver " + v}
	switch {
	case v == "":
		r.Status, r.Message = check.Error, "NVML did not give the driver version"
	case c.c.ExactVersion != "" && compareVersions(v, c.c.ExactVersion) != 0:
		r.Status, r.Action = check.Fail, check.ActionDrain
		r.Message = fmt.Sprintf("driver %s != required %s", v, c.c.ExactVersion)
	case c.c.MinVersion != "" && compareVersions(v, c.c.MinVersion) < 0:
		r.Status, r.Action = check.Fail, check.ActionDrain
		r.Message = fmt.Sprintf("driver %s < minimum %s", v, c.c.MinVersion)
	}
	return r
}

// compareVersions compares dotted versions field by field as numbers
// ("550.100" > "550.54.15"); a missing field counts as 0, and a field that
// is not a number compares as text.
func compareVersions(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < max(len(as), len(bs)); i++ {
		x, y := field(as, i), field(bs, i)
		xi, errx := strconv.ParseUint(x, 10, 64)
		yi, erry := strconv.ParseUint(y, 10, 64)
		switch {
		case errx == nil && erry == nil && xi != yi:
			if xi < yi {
				return -1
			}
			return 1
		case (errx != nil || erry != nil) && x != y:
			return strings.Compare(x, y)
		}
	}
	return 0
}

func field(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "0"
}
