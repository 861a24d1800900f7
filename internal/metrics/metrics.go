// Package metrics writes gpuhc's Prometheus metrics for node_exporter's
// textfile collector (docs/architecture.md#metrics): one file, gpuhc.prom,
// replaced atomically after every health check run.
//
// The families, all without timestamps (the textfile collector refuses
// them):
//
//	gpuhc_check_status{check,component,status}  gauge, a state set: for each
//	    component, one series per status (OK, WARN, FAIL, ERROR, SKIP), 1 for
//	    the status it has now and 0 for the other four. Alert on
//	    gpuhc_check_status{status="FAIL"} == 1.
//	gpuhc_check_duration_seconds{check}         gauge, how long each check took
//	gpuhc_failures_total{check}                 counter, FAIL episodes opened
//	gpuhc_last_run_timestamp_seconds            gauge, Unix time of the run
//	gpuhc_drained                               gauge, 1 while gpuhc's health
//	    check holds this node drained
//	gpuhc_drain_suppressed                      gauge, 1 while the storm
//	    guard holds back this node's drain (it fails, and is not drained)
//	gpuhc_measurement{check,component,name,unit} gauge, each figure the run
//	    measured (check.Result.Figures: gpuhc-healthcheck --deep's
//	    bandwidth, e.g. component="gpu0/h2d",name="h2d",unit="GB/s")
//	gpuhc_measurement_floor{check,component,name,unit} gauge, the floor
//	    a figure was judged against, only for figures that have one
//
// The two measurement families are written only by a run that measured
// (a plain run has no figures, and its file has neither family).
package metrics

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gpuhc/gpuhc/internal/atomicfile"
	"github.com/gpuhc/gpuhc/internal/check"
)

// FileName is the file written in the textfile directory. node_exporter
// reads only *.prom files, so the temp file it is written through is
// never read half-written.
const FileName = "gpuhc.prom"

// Statuses is the order in which a component's state set is written.
var Statuses = []check.Status{check.OK, check.Warn, check.Fail, check.Error, check.Skip}

// Snapshot is what one run exposes.
type Snapshot struct {
	// Results are the run's results, one per component.
	Results []check.Result
	// Timed gives each check's duration; it may be empty (a run that
	// checked nothing itself, such as the stuck-run drain).
	Timed []check.Timed
	// Failures is every check's count of FAIL episodes so far (Episodes).
	Failures map[string]uint64
	// LastRun is when the run finished.
	LastRun time.Time
	// Drained is whether this node is drained by gpuhc's health check.
	Drained bool
	// Suppressed is whether the storm guard refused this node's drain
	// and the failure it refused is still the policy's latest word: the
	// node should be out of service and is not, which no other series
	// shows (gpuhc_drained is 0, as for a healthy node).
	Suppressed bool
}

const (
	helpStatus   = "Status of each checked component in the last run, as a state set: 1 for the status the component has, 0 for the other four of OK, WARN, FAIL, ERROR and SKIP."
	helpDuration = "Wall time each check took in the last run."
	helpFailures = "FAIL episodes per check since gpuhc's state directory was created: a check counts 1 when it reports FAIL after a run of it with no FAIL and no ERROR, however many runs the failure lasts."
	helpLastRun  = "Unix time at which the last health check run (not a dry run) finished."
	helpDrained  = "1 while this node is drained by gpuhc's health check (its own drain, per its state file), else 0."
	helpSuppress = "1 while the storm guard holds back this node's drain: it failed a check, but too many nodes are already drained by gpuhc; else 0."
	helpMeasure  = "Figures measured in the last run (gpuhc-healthcheck --deep: bandwidth), in the unit its label names."
	helpFloor    = "The floor each measured figure was judged against (below it: FAIL); absent for figures without a floor."
)

// Format renders the snapshot in the Prometheus text exposition format
// (version 0.0.4). Series are sorted, so equal snapshots give equal
// bytes.
func (s Snapshot) Format() []byte {
	var b bytes.Buffer

	header(&b, "gpuhc_check_status", "gauge", helpStatus)
	for _, r := range worstPerComponent(s.Results) {
		for _, st := range Statuses {
			v := 0.0
			if r.Status == st {
				v = 1
			}
			sample(&b, "gpuhc_check_status", v, "check", r.Check, "component", r.Component, "status", st.String())
		}
	}

	header(&b, "gpuhc_check_duration_seconds", "gauge", helpDuration)
	durations := map[string]time.Duration{}
	for _, t := range s.Timed {
		durations[t.Name] = max(durations[t.Name], t.Duration)
	}
	for _, name := range sortedKeys(durations) {
		sample(&b, "gpuhc_check_duration_seconds", durations[name].Seconds(), "check", name)
	}

	// Every check this run saw is written, at 0 when it never failed: a
	// counter that appears already at 1 hides its first increase from
	// rate() and increase().
	header(&b, "gpuhc_failures_total", "counter", helpFailures)
	failures := map[string]uint64{}
	for c, n := range s.Failures {
		failures[c] = n
	}
	for _, r := range s.Results {
		failures[r.Check] += 0
	}
	for _, name := range sortedKeys(failures) {
		sample(&b, "gpuhc_failures_total", float64(failures[name]), "check", name)
	}

	header(&b, "gpuhc_last_run_timestamp_seconds", "gauge", helpLastRun)
	sample(&b, "gpuhc_last_run_timestamp_seconds", float64(s.LastRun.UnixMilli())/1000)

	header(&b, "gpuhc_drained", "gauge", helpDrained)
	drained := 0.0
	if s.Drained {
		drained = 1
	}
	sample(&b, "gpuhc_drained", drained)

	header(&b, "gpuhc_drain_suppressed", "gauge", helpSuppress)
	suppressed := 0.0
	if s.Suppressed {
		suppressed = 1
	}
	sample(&b, "gpuhc_drain_suppressed", suppressed)

	figures := measurements(s.Results)
	if len(figures) > 0 {
		header(&b, "gpuhc_measurement", "gauge", helpMeasure)
		for _, f := range figures {
			sample(&b, "gpuhc_measurement", f.Value, f.labels()...)
		}
	}
	if slices.ContainsFunc(figures, func(f measured) bool { return f.Floor > 0 }) {
		header(&b, "gpuhc_measurement_floor", "gauge", helpFloor)
		for _, f := range figures {
			if f.Floor > 0 {
				sample(&b, "gpuhc_measurement_floor", f.Floor, f.labels()...)
			}
		}
	}
	return b.Bytes()
}

// worstPerComponent keeps one result per check and component, the worst,
// sorted: a check that reported a component twice must not make two
// series with one label set, which would make the file invalid.
func worstPerComponent(results []check.Result) []check.Result {
	type key struct{ check, component string }
	worst := map[key]check.Result{}
	for _, r := range results {
		// Keys are the escaped values: two names that differ only in
		// invalid UTF-8 would otherwise collide in the file.
		k := key{labelValue(r.Check), labelValue(r.Component)}
		if w, ok := worst[k]; !ok || r.Status > w.Status {
			worst[k] = r
		}
	}
	keys := make([]key, 0, len(worst))
	for k := range worst {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := strings.Compare(a.check, b.check); c != 0 {
			return c
		}
		return strings.Compare(a.component, b.component)
	})
	out := make([]check.Result, len(keys))
	for i, k := range keys {
		out[i] = worst[k]
	}
	return out
}

// measured is one figure with the result it came from.
type measured struct {
	chk, component string
	check.Figure
}

func (m measured) labels() []string {
	return []string{"check", m.chk, "component", m.component, "name", m.Name, "unit", m.Unit}
}

// measurements lists the results' figures sorted by their labels, one
// per label set (the first), so that the file stays valid whatever a
// check reports.
func measurements(results []check.Result) []measured {
	type key struct{ chk, component, name, unit string }
	byKey := map[key]measured{}
	for _, r := range results {
		for _, f := range r.Figures {
			// Keys are the escaped values, as in worstPerComponent.
			k := key{labelValue(r.Check), labelValue(r.Component), labelValue(f.Name), labelValue(f.Unit)}
			if _, ok := byKey[k]; !ok {
				byKey[k] = measured{r.Check, r.Component, f}
			}
		}
	}
	keys := slices.Collect(maps.Keys(byKey))
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(strings.Compare(a.chk, b.chk), strings.Compare(a.component, b.component),
			strings.Compare(a.name, b.name), strings.Compare(a.unit, b.unit))
	})
	out := make([]measured, len(keys))
	for i, k := range keys {
		out[i] = byKey[k]
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	seen := map[string]bool{}
	for k := range m {
		// As in worstPerComponent: one series per escaped value.
		if v := labelValue(k); !seen[v] {
			seen[v] = true
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

func header(b *bytes.Buffer, name, typ, help string) {
	fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", name, escapeHelp(help), name, typ)
}

// sample writes one line; labels come as name, value pairs.
func sample(b *bytes.Buffer, name string, v float64, labels ...string) {
	b.WriteString(name)
	if len(labels) > 0 {
		b.WriteByte('{')
		for i := 0; i < len(labels); i += 2 {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(b, "%s=\"%s\"", labels[i], labelValue(labels[i+1]))
		}
		b.WriteByte('}')
	}
	b.WriteByte(' ')
	b.WriteString(formatValue(v))
	b.WriteByte('\n')
}

// labelValue escapes a label value as the exposition format requires
// (backslash, double quote and line feed) and makes it valid UTF-8:
// component names come from the kernel and may hold any byte.
func labelValue(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return labelEscaper.Replace(s)
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// escapeHelp escapes a HELP text: backslash and line feed.
func escapeHelp(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(strings.ToValidUTF8(s, "\uFFFD"))
}

func formatValue(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// WriteTextfile replaces dir/gpuhc.prom with data, atomically, so a scrape
// sees the previous run's file or this one's, never a torn one. The temp
// file's leading dot keeps node_exporter from reading it; mode 0644
// because node_exporter does not run as root. No fsync: the file is
// rewritten every run, and after a crash an old or empty file is valid.
func WriteTextfile(dir string, data []byte) error {
	return atomicfile.Write(filepath.Join(dir, FileName), data,
		atomicfile.Options{Mode: 0o644, DirMode: 0o755, Pattern: "." + FileName + ".*.tmp"})
}
