// Package evidence loads the corpus of real evidence under
// testdata/evidence: kernel log lines pasted in public bug reports, whole
// kernel log excerpts and Fabric Manager logs, each with the verdict
// NVIDIA's or the kernel's documentation gives it.
//
// The expected verdicts were written from the documents named in each
// item's basis, never by running gpuhc, so a rule that disagrees with an
// item is the thing to look at (or the item's basis, which then has to be
// argued from the document). The package only reads and validates the
// data; the rule packages' tests judge it.
package evidence

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/gpuhc/gpuhc/internal/lazyre"
)

// The checks, statuses and actions an item may expect. ERROR and SKIP
// never come from a line, so an item cannot expect them.
var (
	knownChecks   = map[string]bool{"gpu.xid": true, "fabric.sxid": true, "host.kernel": true}
	knownStatuses = map[string]bool{"OK": true, "WARN": true, "FAIL": true}
	knownActions  = map[string]bool{"none": true, "drain": true, "drain-after-job": true, "reset-gpu": true, "reboot": true, "rma": true}
)

// pciAddr is the component form gpuhc uses for a PCI device:
// domain (4 hex digits, 5 on a VMD domain), bus, device, function.
var pciAddr = lazyre.New(`^[0-9a-f]{4,5}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)

// KernelItem is one kernel log line with its expected verdict.
type KernelItem struct {
	ID string `json:"id"`
	// Text is the kernel's message as the rules see it in kmsg.Line.Text:
	// no dmesg, syslog or journal prefix.
	Text string `json:"text"`
	// Raw is the line as it was pasted, prefix and all, when it had one;
	// the replay formats (dmesg, dmesg -T, journalctl -k) are tested on it.
	Raw       string `json:"raw,omitempty"`
	Source    string `json:"source"`
	Synthetic bool   `json:"synthetic"`
	Check     string `json:"check"`
	Status    string `json:"status"`
	Action    string `json:"action"`
	// Component is given where gpuhc's conventions fix it (an XID's
	// or SXid's PCI address, AER's device, mlx5's HCA); empty otherwise.
	Component string `json:"component,omitempty"`
	// Basis quotes the documentation fact the verdict was taken from.
	Basis string `json:"basis"`
	Note  string `json:"note,omitempty"`
}

// Verdict is one result a whole log is expected to produce.
type Verdict struct {
	Check     string `json:"check"`
	Status    string `json:"status"`
	Action    string `json:"action"`
	Component string `json:"component,omitempty"`
	Basis     string `json:"basis,omitempty"`
}

// Expect is a log's sidecar (<name>.expect.json).
type Expect struct {
	Source string `json:"source"`
	// Verdicts are the non-OK results the log must give, one per
	// component; an empty list means the log must give none.
	Verdicts []Verdict `json:"verdicts"`
	// HealthyOtherwise: nothing beyond Verdicts may be WARN or FAIL.
	HealthyOtherwise bool   `json:"healthy_otherwise"`
	Note             string `json:"note,omitempty"`
}

// Log is one whole log excerpt and what it must give.
type Log struct {
	Name   string // file name, e.g. "h100-boot-healthy.dmesg"
	Path   string // absolute path
	Expect Expect
}

// Dir is testdata/evidence at the module root.
func Dir() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "testdata", "evidence"), nil
}

// moduleRoot finds the directory holding go.mod: from this source file
// when its path is known (go test), else upwards from the working
// directory (a -trimpath build).
func moduleRoot() (string, error) {
	var starts []string
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		starts = append(starts, filepath.Dir(file))
	}
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	for _, dir := range starts {
		for d := dir; ; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				return d, nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return "", errors.New("evidence: no go.mod above this package or the working directory")
}

// Kernel reads and validates kernel/corpus.jsonl.
func Kernel() ([]KernelItem, error) {
	dir, err := Dir()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "kernel", "corpus.jsonl")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("evidence: %w", err)
	}
	items, err := parseKernel(data)
	if err != nil {
		return nil, fmt.Errorf("evidence: %s: %w", path, err)
	}
	return items, nil
}

// parseKernel reads one item a line; every item must pass validate and
// ids must be unique.
func parseKernel(data []byte) ([]KernelItem, error) {
	var items []KernelItem
	seen := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var it KernelItem
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&it); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if err := it.validate(); err != nil {
			return nil, fmt.Errorf("line %d (%s): %w", n, it.ID, err)
		}
		if prev, dup := seen[it.ID]; dup {
			return nil, fmt.Errorf("line %d: id %q already used on line %d", n, it.ID, prev)
		}
		seen[it.ID] = n
		items = append(items, it)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return items, nil
}

func (it *KernelItem) validate() error {
	switch {
	case it.ID == "":
		return errors.New("no id")
	case strings.TrimSpace(it.Text) == "":
		return errors.New("no text")
	case strings.ContainsAny(it.Text, "\n\r"):
		return errors.New("text is more than one line")
	case it.Raw != "" && !strings.Contains(it.Raw, it.Text):
		return errors.New("raw does not contain text: text must be raw less its prefix")
	case !knownChecks[it.Check]:
		return fmt.Errorf("unknown check %q", it.Check)
	case strings.TrimSpace(it.Basis) == "":
		return errors.New("no basis: quote the documentation the verdict comes from")
	case it.Synthetic && strings.TrimSpace(it.Note) == "":
		return errors.New("synthetic without a note saying why no public sample was used")
	case !it.Synthetic && !isSource(it.Source):
		return fmt.Errorf("source %q is not a URL or repo+path", it.Source)
	}
	if err := checkVerdict(it.Status, it.Action, it.Component); err != nil {
		return err
	}
	return nil
}

// checkVerdict: a FAIL names what to do, an OK or WARN never does.
func checkVerdict(status, action, component string) error {
	switch {
	case !knownStatuses[status]:
		return fmt.Errorf("unknown status %q (want OK, WARN or FAIL)", status)
	case !knownActions[action]:
		return fmt.Errorf("unknown action %q", action)
	case status == "FAIL" && action == "none":
		return errors.New("a FAIL needs an action")
	case status != "FAIL" && action != "none":
		return fmt.Errorf("a %s has action none, not %q", status, action)
	case component != "" && !pciAddr.MatchString(component) && component != "host":
		return fmt.Errorf("component %q is neither a PCI address (0000:3b:00.0) nor host", component)
	}
	return nil
}

// isSource accepts a URL or a "repo+path" reference.
func isSource(s string) bool {
	return strings.HasPrefix(s, "https://") || strings.Contains(s, "@") && strings.Contains(s, "/")
}

// Logs reads kernel/logs: every log with its sidecar.
func Logs() ([]Log, error) { return logsIn(filepath.Join("kernel", "logs"), knownChecks) }

// FabricManagerLogs reads fabricmanager: every Fabric Manager log with
// its sidecar (verdicts of the fabric.manager check).
func FabricManagerLogs() ([]Log, error) {
	return logsIn("fabricmanager", map[string]bool{"fabric.manager": true})
}

func logsIn(sub string, checks map[string]bool) ([]Log, error) {
	dir, err := Dir()
	if err != nil {
		return nil, err
	}
	dir = filepath.Join(dir, sub)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("evidence: %w", err)
	}
	var logs []Log
	sidecars := map[string]bool{}
	for _, e := range ents {
		name := e.Name()
		if strings.HasSuffix(name, ".expect.json") {
			sidecars[name] = true
			continue
		}
		if e.IsDir() || name == "README.md" {
			continue
		}
		l, err := readLog(dir, name, checks)
		if err != nil {
			return nil, err
		}
		logs = append(logs, l)
	}
	for _, l := range logs {
		delete(sidecars, l.Name+".expect.json")
	}
	if len(sidecars) > 0 {
		var orphans []string
		for s := range sidecars {
			orphans = append(orphans, s)
		}
		sort.Strings(orphans)
		return nil, fmt.Errorf("evidence: %s: sidecars without a log: %s", dir, strings.Join(orphans, ", "))
	}
	return logs, nil
}

func readLog(dir, name string, checks map[string]bool) (Log, error) {
	path := filepath.Join(dir, name)
	side := path + ".expect.json"
	data, err := os.ReadFile(side)
	if err != nil {
		return Log{}, fmt.Errorf("evidence: %s has no sidecar: %w", name, err)
	}
	var ex Expect
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ex); err != nil {
		return Log{}, fmt.Errorf("evidence: %s: %w", side, err)
	}
	if !isSource(ex.Source) {
		return Log{}, fmt.Errorf("evidence: %s: source %q is not a URL or repo+path", side, ex.Source)
	}
	for i, v := range ex.Verdicts {
		if !checks[v.Check] {
			return Log{}, fmt.Errorf("evidence: %s: verdict %d: unexpected check %q", side, i, v.Check)
		}
		if err := checkVerdict(v.Status, v.Action, v.Component); err != nil {
			return Log{}, fmt.Errorf("evidence: %s: verdict %d: %w", side, i, err)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		return Log{}, fmt.Errorf("evidence: %s is missing or empty", path)
	}
	return Log{Name: name, Path: path, Expect: ex}, nil
}

// Lines reads a log's lines (without their newline).
func (l Log) Lines() ([]string, error) {
	data, err := os.ReadFile(l.Path)
	if err != nil {
		return nil, fmt.Errorf("evidence: %w", err)
	}
	s := strings.TrimSuffix(string(data), "\n")
	return strings.Split(s, "\n"), nil
}
