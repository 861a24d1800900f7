package config

import (
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/gpuhc/gpuhc/internal/lazyre"
	"github.com/gpuhc/gpuhc/internal/sysread"
)

// MaxFile caps a config file. A config with a [[host]] section for each
// of 10,000 nodes is some 1 MB; a FIFO, a device or a file past this is
// refused before anything is parsed, so a bad path cannot hang or bloat
// every run.
const MaxFile = 4 << 20

// Load reads the configuration for node from path: defaults, then the
// file, then every [[host]] section whose match names node (in file
// order), then %n expanded to node in the path settings, then validation.
//
// A missing file is an error wrapping fs.ErrNotExist; see LoadOrDefault.
// Every problem in the file is reported at once as an ErrorList.
func Load(path, node string) (Config, error) {
	data, err := sysread.Regular(path, MaxFile)
	if err != nil {
		return Config{}, errorf("config: %w", err)
	}
	return Parse(path, data, node)
}

// LoadOrDefault is Load, except that a file nobody asked for explicitly
// (the packaged default path) may be absent: then the defaults apply.
func LoadOrDefault(path, node string, explicit bool) (Config, error) {
	c, err := Load(path, node)
	if err == nil || explicit || !errors.Is(err, fs.ErrNotExist) {
		return c, err
	}
	l := &loader{node: node}
	c = l.check(Default(), nil)
	if err := l.err(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// Parse is Load for a document already in memory; file names it in errors.
func Parse(file string, data []byte, node string) (Config, error) {
	l := &loader{file: file, node: node}
	c := l.parse(string(data))
	if err := l.err(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// loader carries one load's inputs and the problems found so far.
type loader struct {
	file    string
	node    string
	lines   map[string]int   // instance path → line
	keyAt   map[string][]int // key → the line of each occurrence
	arrays  map[string]bool  // instance paths of arrays some key sits in
	errs    ErrorList
	dropped int // problems past maxErrors, counted only
}

func (l *loader) parse(src string) Config {
	keys, err := scanKeys(src)
	var se *shapeError
	if errors.As(err, &se) {
		l.add(se.line, "", "%s (a gpuhc config needs far less; refused before parsing)", se.msg)
		return Config{}
	}
	var raw map[string]any
	md, err := toml.Decode(src, &raw)
	if err != nil {
		l.addErr(err)
		return Config{}
	}
	l.index(keys)
	hosts, _ := tableArray(raw["host"])
	if len(hosts) > MaxHosts {
		l.add(0, "host", "%d [[host]] sections: at most %d (one section's match can name many hosts, e.g. \"gpu[001-512]\")", len(hosts), MaxHosts)
		return Config{}
	}
	l.unknownKeys(md.Keys())
	l.typeCheck(raw, reflect.TypeFor[fileSchema](), nil, "")
	lists := l.hostLists(hosts)
	if len(l.errs) > 0 {
		return Config{}
	}
	return l.apply(src, hosts, lists)
}

// index builds the lookups that error reporting needs, once, so that
// reporting stays linear however many problems a file has.
func (l *loader) index(keys []keyPos) {
	l.lines = make(map[string]int, len(keys))
	l.keyAt = make(map[string][]int, len(keys))
	l.arrays = map[string]bool{}
	for _, k := range keys {
		if _, ok := l.lines[k.inst]; !ok {
			l.lines[k.inst] = k.line
		}
		l.keyAt[k.key] = append(l.keyAt[k.key], k.line)
		for i := range len(k.inst) {
			if k.inst[i] == '[' {
				l.arrays[k.inst[:i]] = true
			}
		}
	}
}

// apply decodes the base and the host sections. Every section is decoded
// and validated on top of the base alone, matching or not, so that a file
// accepted on one node is accepted on all; the matching ones are then
// layered in order to make this node's configuration.
func (l *loader) apply(src string, hosts []map[string]any, lists []HostList) Config {
	doc := fileDoc{Config: Default()}
	md, err := toml.Decode(src, &doc)
	if err != nil {
		l.addErr(err)
		return Config{}
	}
	base, cur := doc.Config, doc.Config
	l.check(base, nil)
	var applied []int
	decoded := true
	for i, prim := range doc.Host {
		alone, ok := l.decodeHost(&md, prim, base, hosts[i])
		if !ok {
			decoded = false
			continue
		}
		l.check(alone.Config, []int{i})
		if !lists[i].Match(l.node) {
			continue
		}
		if next, ok := l.decodeHost(&md, prim, cur, hosts[i]); ok {
			cur = next.Config
			applied = append(applied, i)
		}
	}
	if decoded { // a failed decode leaves keys unvisited, not unknown
		l.undecoded(md.Undecoded())
	}
	return l.check(cur, applied)
}

// decodeHost decodes one [[host]] section on top of onto.
func (l *loader) decodeHost(md *toml.MetaData, prim toml.Primitive, onto Config, raw map[string]any) (hostSection, bool) {
	hs := hostSection{Config: onto}
	dropSetSlices(reflect.ValueOf(&hs).Elem(), raw)
	if err := md.PrimitiveDecode(prim, &hs); err != nil {
		l.addErr(err)
		return hs, false
	}
	return hs, true
}

// hostLists parses every [[host]] section's match expression.
func (l *loader) hostLists(hosts []map[string]any) []HostList {
	lists := make([]HostList, len(hosts))
	for i, h := range hosts {
		inst := fmt.Sprintf("host[%d]", i)
		v, ok := h["match"]
		if !ok {
			l.addAt(inst, "host.match", `[[host]] section needs a "match" key naming the hosts it applies to`)
			continue
		}
		expr, ok := v.(string)
		if !ok {
			continue // typeCheck has reported it
		}
		var err error
		if lists[i], err = ParseHostList(expr); err != nil {
			l.addAt(inst+".match", "host.match", "host.match: %v", err)
		}
	}
	return lists
}

// unknownKeys reports every key the schema lacks, at each place it occurs.
func (l *loader) unknownKeys(keys []toml.Key) {
	schema := reflect.TypeFor[fileSchema]()
	unknown := map[string]bool{}
	for _, k := range keys {
		if !knownKey(schema, k) {
			unknown[k.String()] = true
		}
	}
	l.reportUnknown(keys, unknown)
}

// undecoded is a second line of defence: whatever the decoder did not use
// is unknown too, even if the schema walk thought otherwise.
func (l *loader) undecoded(keys []toml.Key) {
	unknown := map[string]bool{}
	for _, k := range keys {
		unknown[k.String()] = true
	}
	l.reportUnknown(keys, unknown)
}

// reportUnknown names only the outermost unknown key: under an unknown
// [table], its keys are not reported again.
func (l *loader) reportUnknown(keys []toml.Key, unknown map[string]bool) {
	done := map[string]bool{}
	for _, k := range keys {
		s := k.String()
		if !unknown[s] || done[s] || underUnknown(k, unknown) {
			continue
		}
		done[s] = true
		lines := l.keyAt[s]
		if len(lines) == 0 {
			lines = []int{0}
		}
		for _, n := range lines {
			l.add(n, s, "unknown key %q", s)
		}
	}
}

func underUnknown(k toml.Key, unknown map[string]bool) bool {
	for n := 1; n < len(k); n++ {
		if unknown[k[:n].String()] {
			return true
		}
	}
	return false
}

// add records a problem. Past maxErrors (kept twice over, since repeats
// are dropped later) they are only counted: a file with 100,000 unknown
// keys gets a short error, not a megabyte in slurmd's log.
// err is every problem found, sorted, the first maxErrors of them listed
// and the rest counted.
func (l *loader) err() error {
	if len(l.errs) == 0 {
		return nil
	}
	list := l.errs.sorted()
	more := l.dropped
	if len(list) > maxErrors {
		more += len(list) - maxErrors
		list = list[:maxErrors]
	}
	if more > 0 {
		list = append(list, &Error{File: l.file, Msg: fmt.Sprintf("… and %d more problems not listed", more)})
	}
	return list
}

func (l *loader) add(line int, key, format string, args ...any) {
	if len(l.errs) >= 2*maxErrors {
		l.dropped++
		return
	}
	msg := capMsg(fmt.Sprintf(format, capArgs(args)...))
	l.errs = append(l.errs, &Error{File: l.file, Line: line, Key: cutRunes(key, MaxKeyLen), Msg: msg})
}

// addErr records a decoder error, capped like every other problem.
func (l *loader) addErr(err error) {
	e := l.tomlError(err)
	l.add(e.Line, e.Key, "%s", e.Msg)
}

// addAt reports a problem at the line of an instance path.
func (l *loader) addAt(inst, key, format string, args ...any) {
	l.add(l.lines[inst], key, format, args...)
}

// check expands %n and validates c, reporting each problem at the line
// that set the value: the last of the applied host sections that set it,
// else the base file, else no line (a default).
func (l *loader) check(c Config, hosts []int) Config {
	ps := expandNode(&c, l.node)
	ps = append(ps, validate(c)...)
	for _, p := range ps {
		l.add(l.sourceLine(p.path, hosts), plainKey(p.path), "%s", p.msg)
	}
	return c
}

// sourceLine finds where path was set, falling back to the nearest
// enclosing table that was. An array belongs wholly to the last source
// that set it, since arrays replace: the base's entries are not consulted
// once a host section has set the array.
func (l *loader) sourceLine(path string, hosts []int) int {
	sources := []string{}
	for j := len(hosts) - 1; j >= 0; j-- {
		sources = append(sources, fmt.Sprintf("host[%d].", hosts[j]))
	}
	sources = append(sources, "")
	if arr, _, ok := strings.Cut(path, "["); ok {
		sources = l.arrayOwner(arr, sources)
	}
	for p := path; p != ""; p = parentPath(p) {
		for _, src := range sources {
			if n, ok := l.lines[src+p]; ok {
				return n
			}
		}
	}
	return 0
}

// arrayOwner narrows sources to the first one that sets the array arr.
func (l *loader) arrayOwner(arr string, sources []string) []string {
	for _, src := range sources {
		if l.arrays[src+arr] {
			return []string{src}
		}
		if _, ok := l.lines[src+arr]; ok {
			return []string{src}
		}
	}
	return sources
}

func parentPath(p string) string {
	return p[:max(strings.LastIndexAny(p, ".["), 0)]
}

var indexRe = lazyre.New(`\[\d+\]`)

// plainKey drops array indices: "checks.mounts.mount[1].path" names the
// key "checks.mounts.mount.path".
func plainKey(path string) string { return indexRe.ReplaceAllString(path, "") }
