package host

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
)

// Readings outside this range come from a broken sensor or driver, not
// from hardware that is really that hot or cold.
const (
	minPlausibleC = -40
	maxPlausibleC = 200
)

// minSensorCritC is the lowest sensor-declared critical limit we believe.
// Some drivers and ACPI tables export 0 or other junk; no real part is
// critical below this, and trusting such a value would drain healthy nodes.
const minSensorCritC = 40

type thermal struct {
	root string
	cfg  config.Thermal
}

// NewThermal checks every hwmon temperature input and thermal zone under
// root against the configured limits.
func NewThermal(root string, c config.Thermal) check.Check {
	return &thermal{root: root, cfg: c}
}

func (t *thermal) Name() string { return nameThermal }

// sensor is one temperature input as found in sysfs.
type sensor struct {
	component string
	name      string // hwmon name or zone type; exclude globs match it too
	dev       string // hwmonN or thermal_zoneN
	raw       string // the input attribute, trimmed
	readErr   error
	crit      float64 // the sensor's own critical limit, when hasCrit
	hasCrit   bool
}

func (t *thermal) Run(ctx context.Context) []check.Result {
	for _, g := range t.cfg.Exclude {
		if _, err := filepath.Match(g, ""); err != nil {
			return stamp(nameThermal, []check.Result{errorf(componentHost, "bad exclude pattern %q: %v", g, err)})
		}
	}
	hw, err := t.hwmonSensors(ctx)
	if err != nil {
		return stamp(nameThermal, []check.Result{errorf(componentHost, "%v", err)})
	}
	zones, err := t.zoneSensors(ctx)
	if err != nil {
		return stamp(nameThermal, []check.Result{errorf(componentHost, "%v", err)})
	}
	all := append(hw, zones...)
	if len(all) == 0 {
		return stamp(nameThermal, []check.Result{skipf(componentHost, "no temperature sensors found")})
	}
	var out []check.Result
	for _, s := range all {
		if !t.excluded(s) {
			out = append(out, t.judge(s))
		}
	}
	if len(out) == 0 {
		out = append(out, skipf(componentHost, "all %d temperature sensors excluded", len(all)))
	}
	return stamp(nameThermal, out)
}

func (t *thermal) excluded(s sensor) bool {
	for _, g := range t.cfg.Exclude {
		if ok, _ := filepath.Match(g, s.name); ok {
			return true
		}
		if ok, _ := filepath.Match(g, s.component); ok {
			return true
		}
	}
	return false
}

// judge turns one sensor into a result. A sensor that cannot be believed
// is at most a WARN: a broken sensor must not drain a node.
func (t *thermal) judge(s sensor) check.Result {
	if s.readErr != nil {
		return errorf(s.component, "%v", s.readErr)
	}
	mc, err := strconv.ParseInt(s.raw, 10, 64)
	if err != nil {
		return warnf(s.component, "implausible reading %s", quoteShort(s.raw))
	}
	c := float64(mc) / 1000
	if c < minPlausibleC || c > maxPlausibleC {
		return warnf(s.component, "implausible reading %.1f°C", c)
	}
	limit, which := t.cfg.FailCelsius, "fail limit"
	if t.cfg.UseSensorLimits && s.hasCrit && (limit <= 0 || s.crit < limit) {
		limit, which = s.crit, "sensor crit limit"
	}
	// A limit of 0 (or less) is unset: no node runs that cold.
	switch {
	case limit > 0 && c >= limit:
		return failf(s.component, "%.1f°C >= %s %.1f°C", c, which, limit)
	case t.cfg.WarnCelsius > 0 && c >= t.cfg.WarnCelsius:
		return warnf(s.component, "%.1f°C >= warn limit %.1f°C", c, t.cfg.WarnCelsius)
	case limit > 0:
		return okf(s.component, "%.1f°C < %s %.1f°C", c, which, limit)
	default:
		return okf(s.component, "%.1f°C", c)
	}
}

// parseCrit reads a limit attribute in millidegrees; ok is false for
// anything we should not trust.
func parseCrit(raw string) (float64, bool) {
	mc, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		return 0, false
	}
	c := float64(mc) / 1000
	return c, c >= minSensorCritC && c <= maxPlausibleC
}

// listDir returns the entries of dir whose names start with prefix. A
// missing dir is not an error: the node simply has no such sensors.
func listDir(dir, prefix string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, bare(err))
	}
	var names []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// indexed returns N for names like prefix+N+suffix ("temp3_input"), or -1.
func indexed(name, prefix, suffix string) int {
	mid, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return -1
	}
	mid, ok = strings.CutSuffix(mid, suffix)
	if !ok || mid == "" || len(mid) > 4 || strings.Trim(mid, "0123456789") != "" {
		return -1
	}
	n, _ := strconv.Atoi(mid)
	return n
}

func (t *thermal) hwmonSensors(ctx context.Context) ([]sensor, error) {
	class := at(t.root, "sys/class/hwmon")
	devs, err := listDir(class, "hwmon")
	if err != nil {
		return nil, err
	}
	var all []sensor
	for _, d := range devs {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("interrupted: %w", ctx.Err())
		}
		ss, err := hwmonDevice(filepath.Join(class, d))
		if err != nil {
			return nil, err
		}
		all = append(all, ss...)
	}
	disambiguate(all)
	return all, nil
}

// hwmonDevice reads the temperature inputs of one hwmon device. Kernels
// before 3.x kept the attributes in the device/ subdirectory.
func hwmonDevice(dir string) ([]sensor, error) {
	dev := filepath.Base(dir)
	name := dev
	for _, f := range []string{"name", "device/name"} {
		if n, err := readAttr(filepath.Join(dir, f)); err == nil && n != "" {
			name = n
			break
		}
	}
	ss, err := tempInputs(dir, name, dev)
	if err == nil && len(ss) == 0 {
		ss, err = tempInputs(filepath.Join(dir, "device"), name, dev)
	}
	return ss, err
}

func tempInputs(dir, name, dev string) ([]sensor, error) {
	files, err := listDir(dir, "temp")
	if err != nil {
		return nil, err
	}
	var ss []sensor
	for _, f := range files {
		i := indexed(f, "temp", "_input")
		if i < 0 {
			continue
		}
		attr := func(s string) string { return filepath.Join(dir, fmt.Sprintf("temp%d_%s", i, s)) }
		label, err := readAttr(attr("label"))
		if err != nil || label == "" {
			label = fmt.Sprintf("temp%d", i)
		}
		s := sensor{component: name + "/" + label, name: name, dev: dev}
		s.raw, s.readErr = readAttr(attr("input"))
		if c, err := readAttr(attr("crit")); err == nil {
			s.crit, s.hasCrit = parseCrit(c)
		}
		ss = append(ss, s)
	}
	return ss, nil
}

// disambiguate renames sensors whose component repeats, as "Core 0" does
// on every socket's coretemp device, by adding the hwmon device they came
// from: "coretemp[hwmon3]/Core 0".
func disambiguate(ss []sensor) {
	count := map[string]int{}
	for _, s := range ss {
		count[s.component]++
	}
	for i, s := range ss {
		if count[s.component] > 1 {
			label := strings.TrimPrefix(s.component, s.name+"/")
			ss[i].component = fmt.Sprintf("%s[%s]/%s", s.name, s.dev, label)
		}
	}
}

func (t *thermal) zoneSensors(ctx context.Context) ([]sensor, error) {
	class := at(t.root, "sys/class/thermal")
	zones, err := listDir(class, "thermal_zone")
	if err != nil {
		return nil, err
	}
	var all []sensor
	for _, z := range zones {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("interrupted: %w", ctx.Err())
		}
		all = append(all, zoneSensor(filepath.Join(class, z)))
	}
	return all, nil
}

// zoneSensor reads one thermal zone. Its own limit is the "critical" trip
// point, the temperature at which the kernel shuts the machine down.
func zoneSensor(dir string) sensor {
	zone := filepath.Base(dir)
	typ, err := readAttr(filepath.Join(dir, "type"))
	if err != nil || typ == "" {
		typ = "unknown"
	}
	s := sensor{component: zone + "/" + typ, name: typ, dev: zone}
	s.raw, s.readErr = readAttr(filepath.Join(dir, "temp"))
	s.crit, s.hasCrit = criticalTrip(dir)
	return s
}

func criticalTrip(dir string) (float64, bool) {
	files, err := listDir(dir, "trip_point_")
	if err != nil {
		return 0, false
	}
	for _, f := range files {
		i := indexed(f, "trip_point_", "_type")
		if i < 0 {
			continue
		}
		if typ, err := readAttr(filepath.Join(dir, f)); err != nil || typ != "critical" {
			continue
		}
		raw, err := readAttr(filepath.Join(dir, fmt.Sprintf("trip_point_%d_temp", i)))
		if err != nil {
			continue
		}
		return parseCrit(raw)
	}
	return 0, false
}
