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
	"github.com/gpuhc/gpuhc/internal/sysread"
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
// root against the configured limits: CPU sensors against the cpu_*
// limits, mlx5 HCA sensors against the hca_* limits, the rest against the
// general ones.
func NewThermal(root string, c config.Thermal) check.Check {
	return &thermal{root: root, cfg: c}
}

func (t *thermal) Name() string { return nameThermal }

// sensor is one temperature input as found in sysfs.
type sensor struct {
	component string
	name      string // hwmon name or zone type; exclude globs match it too
	dev       string // hwmonN or thermal_zoneN
	label     string // temp*_label, or "tempN" when there is none
	index     int    // N of tempN_input
	raw       string // the input attribute, trimmed
	readErr   error
	crit      float64 // the sensor's own critical limit, when hasCrit
	hasCrit   bool
	class     sensorClass
	what      string // says which sensor the message is about, when the component does not
	control   bool   // a control value that is reported, not judged (AMD Tctl beside Tdie)
	pci       string // PCI address of the device, for the result's IDs
}

func (t *thermal) Run(ctx context.Context) []check.Result {
	for _, g := range t.cfg.Exclude {
		if _, err := filepath.Match(g, ""); err != nil {
			return stamp(nameThermal, []check.Result{errorf(componentHost, "bad exclude pattern %q: %v", g, err)})
		}
	}
	// Links are followed only while they stay under root; compare
	// resolved paths, as root itself may sit behind a link.
	root := t.root
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	hw, err := hwmonSensors(ctx, root)
	if err != nil {
		return stamp(nameThermal, []check.Result{errorf(componentHost, "%v", err)})
	}
	zones, err := zoneSensors(ctx, root)
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
			r := t.judge(s)
			r.IDs.PCIBusID = s.pci
			out = append(out, r)
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
// never drains: what cannot be read is an ERROR, a number no hardware
// could reach is a WARN (a broken sensor is worth a look, not a node).
func (t *thermal) judge(s sensor) check.Result {
	if s.readErr != nil {
		return errorf(s.component, "%v", s.readErr)
	}
	mc, err := strconv.ParseInt(s.raw, 10, 64)
	if err != nil {
		return errorf(s.component, "reading %s is not a number", sysread.QuoteShort(s.raw))
	}
	c := float64(mc) / 1000
	if c < minPlausibleC || c > maxPlausibleC {
		return warnf(s.component, "implausible reading %.1f°C", c)
	}
	if s.control {
		return okf(s.component, "control value %.1f°C, Tdie is judged instead", c)
	}
	warn, fail := t.limits(s.class)
	limit, which := fail, "fail limit"
	if t.cfg.UseSensorLimits && s.hasCrit && (limit <= 0 || s.crit < limit) {
		limit, which = s.crit, "sensor crit limit"
	}
	v := fmt.Sprintf("%.1f°C", c)
	if s.what != "" {
		v = s.what + " " + v
	}
	// A limit of 0 (or less) is unset: no node runs that cold.
	switch {
	case limit > 0 && c >= limit:
		return failf(s.component, "%s >= %s %.1f°C", v, which, limit)
	case warn > 0 && c >= warn:
		return warnf(s.component, "%s >= warn limit %.1f°C", v, warn)
	case limit > 0:
		return okf(s.component, "%s < %s %.1f°C", v, which, limit)
	default:
		return okf(s.component, "%s", v)
	}
}

// limits returns the warn and fail limits for a class of sensor; a class
// limit of 0 falls back to the general one.
func (t *thermal) limits(c sensorClass) (warn, fail float64) {
	warn, fail = t.cfg.WarnCelsius, t.cfg.FailCelsius
	pick := func(class, general float64) float64 {
		if class > 0 {
			return class
		}
		return general
	}
	switch c {
	case classCPU:
		return pick(t.cfg.CPUWarnCelsius, warn), pick(t.cfg.CPUFailCelsius, fail)
	case classHCA:
		return pick(t.cfg.HCAWarnCelsius, warn), pick(t.cfg.HCAFailCelsius, fail)
	}
	return warn, fail
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
		return nil, fmt.Errorf("list %s: %w", dir, sysread.Bare(err))
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

func hwmonSensors(ctx context.Context, root string) ([]sensor, error) {
	class := at(root, "sys/class/hwmon")
	devs, err := listDir(class, "hwmon")
	if err != nil {
		return nil, err
	}
	var all []sensor
	for _, d := range devs {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("interrupted: %w", ctx.Err())
		}
		ss, err := hwmonDevice(root, filepath.Join(class, d))
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
func hwmonDevice(root, dir string) ([]sensor, error) {
	dev := filepath.Base(dir)
	name := dev
	for _, f := range []string{"name", "device/name"} {
		if n, err := sysread.Attr(filepath.Join(dir, f)); err == nil && n != "" {
			name = n
			break
		}
	}
	ss, err := tempInputs(dir, name, dev)
	if err == nil && len(ss) == 0 {
		ss, err = tempInputs(filepath.Join(dir, "device"), name, dev)
	}
	if err != nil {
		return nil, err
	}
	classify(root, dir, name, ss)
	return ss, nil
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
		label, err := sysread.Attr(attr("label"))
		if err != nil || label == "" {
			label = fmt.Sprintf("temp%d", i)
		}
		s := sensor{component: name + "/" + label, name: name, dev: dev, label: label, index: i}
		s.raw, s.readErr = sysread.Attr(attr("input"))
		if c, err := sysread.Attr(attr("crit")); err == nil {
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

func zoneSensors(ctx context.Context, root string) ([]sensor, error) {
	class := at(root, "sys/class/thermal")
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
	typ, err := sysread.Attr(filepath.Join(dir, "type"))
	if err != nil || typ == "" {
		typ = "unknown"
	}
	s := sensor{component: zone + "/" + typ, name: typ, dev: zone}
	s.raw, s.readErr = sysread.Attr(filepath.Join(dir, "temp"))
	s.crit, s.hasCrit = criticalTrip(dir)
	if typ == "x86_pkg_temp" {
		// The same die as coretemp's package sensor: judged with the
		// CPU limits, or it would drain below them.
		s.class = classCPU
	}
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
		if typ, err := sysread.Attr(filepath.Join(dir, f)); err != nil || typ != "critical" {
			continue
		}
		raw, err := sysread.Attr(filepath.Join(dir, fmt.Sprintf("trip_point_%d_temp", i)))
		if err != nil {
			continue
		}
		return parseCrit(raw)
	}
	return 0, false
}
