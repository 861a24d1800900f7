// Package promtest is a strict parser of the Prometheus text exposition
// format (version 0.0.4), for tests of what gpuhc writes for
// node_exporter's textfile collector. It refuses everything Prometheus's
// own parser refuses that gpuhc could get wrong, and more:
//
//   - every line is a HELP, TYPE or other comment line, or a sample;
//     blank lines are allowed (the format ignores them), lines with
//     leading or trailing blanks are not;
//   - the text is UTF-8 and ends with a line feed;
//   - metric names match [a-zA-Z_:][a-zA-Z0-9_:]*, label names
//     [a-zA-Z_][a-zA-Z0-9_]* and do not start with "__";
//   - label values are quoted, and escape only \\, \" and \n;
//     HELP texts escape only \\ and \n;
//   - a family has at most one HELP and one TYPE, TYPE is a known type
//     and comes before the family's first sample, and the lines of a
//     family are contiguous;
//   - every sample belongs to a family with a TYPE (histogram and summary
//     samples by their _bucket, _sum and _count suffixes);
//   - values parse (decimal floats, NaN, +Inf, -Inf), counters are not
//     negative, and no sample carries a timestamp (the textfile collector
//     refuses them);
//   - a label name appears once per sample, and no two samples have the
//     same name and label set.
package promtest

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Sample is one sample line.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Family is a metric family: its metadata and samples, in file order.
type Family struct {
	Name, Type, Help string
	HasHelp          bool
	Samples          []Sample
}

// Doc is a parsed exposition.
type Doc struct {
	// Families by name, and their names in file order.
	Families map[string]*Family
	Order    []string
}

var (
	metricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelName  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
	floatValue = regexp.MustCompile(`^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$`)
	types      = []string{"counter", "gauge", "histogram", "summary", "untyped"}
)

// Parse parses and checks data; the error names the first offending line.
func Parse(data []byte) (*Doc, error) {
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("not valid UTF-8")
	}
	text := string(data)
	if text != "" && !strings.HasSuffix(text, "\n") {
		return nil, fmt.Errorf("the last line does not end with a line feed")
	}
	p := parser{doc: &Doc{Families: map[string]*Family{}}, series: map[string]int{}, closed: map[string]bool{}}
	for i, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if text == "" {
			break
		}
		if err := p.line(line); err != nil {
			return nil, fmt.Errorf("line %d: %w: %q", i+1, err, line)
		}
	}
	return p.doc, nil
}

type parser struct {
	doc     *Doc
	current string          // family of the previous line
	closed  map[string]bool // families whose lines have ended
	series  map[string]int  // name{sorted labels} -> line seen
	n       int
}

func (p *parser) line(line string) error {
	p.n++
	switch {
	case line == "":
		return nil
	case strings.TrimSpace(line) != line:
		return fmt.Errorf("leading or trailing blanks")
	case strings.HasPrefix(line, "#"):
		return p.comment(line)
	}
	return p.sample(line)
}

// enter moves to family name, refusing to come back to a closed one.
func (p *parser) enter(name string) (*Family, error) {
	if name != p.current {
		if p.closed[name] {
			return nil, fmt.Errorf("lines of %s are not contiguous", name)
		}
		if p.current != "" {
			p.closed[p.current] = true
		}
		p.current = name
	}
	f, ok := p.doc.Families[name]
	if !ok {
		f = &Family{Name: name}
		p.doc.Families[name] = f
		p.doc.Order = append(p.doc.Order, name)
	}
	return f, nil
}

func (p *parser) comment(line string) error {
	rest := strings.TrimLeft(line[1:], " \t")
	keyword, rest, _ := strings.Cut(rest, " ")
	if keyword != "HELP" && keyword != "TYPE" {
		return nil // a plain comment
	}
	name, text, _ := strings.Cut(rest, " ")
	if !metricName.MatchString(name) {
		return fmt.Errorf("%s: bad metric name %q", keyword, name)
	}
	f, err := p.enter(name)
	if err != nil {
		return err
	}
	if keyword == "HELP" {
		if f.HasHelp {
			return fmt.Errorf("second HELP for %s", name)
		}
		help, err := unescape(text, false)
		if err != nil {
			return fmt.Errorf("HELP: %w", err)
		}
		f.Help, f.HasHelp = help, true
		return nil
	}
	if f.Type != "" {
		return fmt.Errorf("second TYPE for %s", name)
	}
	if len(f.Samples) > 0 {
		return fmt.Errorf("TYPE for %s after its samples", name)
	}
	if !slices.Contains(types, text) {
		return fmt.Errorf("unknown type %q", text)
	}
	f.Type = text
	return nil
}

// family finds the family a sample name belongs to.
func (p *parser) family(name string) (string, error) {
	if f, ok := p.doc.Families[name]; ok && f.Type != "" {
		return name, nil
	}
	for _, suf := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suf)
		if !ok {
			continue
		}
		if f, ok := p.doc.Families[base]; ok && (f.Type == "histogram" || (f.Type == "summary" && suf != "_bucket")) {
			return base, nil
		}
	}
	return "", fmt.Errorf("sample of %s has no TYPE line before it", name)
}

func (p *parser) sample(line string) error {
	end := strings.IndexAny(line, "{ \t")
	if end < 0 {
		return fmt.Errorf("no value")
	}
	name, rest := line[:end], line[end:]
	if !metricName.MatchString(name) {
		return fmt.Errorf("bad metric name %q", name)
	}
	labels := map[string]string{}
	if strings.HasPrefix(rest, "{") {
		var err error
		if labels, rest, err = parseLabels(rest[1:]); err != nil {
			return err
		}
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 || (rest[0] != ' ' && rest[0] != '\t') {
		return fmt.Errorf("no blank and value after the name and labels")
	}
	if len(fields) > 1 {
		return fmt.Errorf("a timestamp or extra field %q (the textfile collector refuses timestamps)", fields[1:])
	}
	v, err := parseValue(fields[0])
	if err != nil {
		return err
	}
	famName, err := p.family(name)
	if err != nil {
		return err
	}
	f, err := p.enter(famName)
	if err != nil {
		return err
	}
	if f.Type == "counter" && (v < 0 || math.IsNaN(v)) {
		return fmt.Errorf("counter %s is %v", name, v)
	}
	key := seriesKey(name, labels)
	if at, dup := p.series[key]; dup {
		return fmt.Errorf("duplicate series %s (first on line %d)", key, at)
	}
	p.series[key] = p.n
	f.Samples = append(f.Samples, Sample{Name: name, Labels: labels, Value: v})
	return nil
}

// parseLabels reads name="value" pairs up to the closing brace, with an
// optional trailing comma, and returns what follows the brace.
func parseLabels(s string) (map[string]string, string, error) {
	labels := map[string]string{}
	for {
		if rest, ok := strings.CutPrefix(s, "}"); ok {
			return labels, rest, nil
		}
		name, after, ok := strings.Cut(s, "=")
		if !ok {
			return nil, "", fmt.Errorf("label without '='")
		}
		if !labelName.MatchString(name) || strings.HasPrefix(name, "__") {
			return nil, "", fmt.Errorf("bad label name %q", name)
		}
		if _, dup := labels[name]; dup {
			return nil, "", fmt.Errorf("label %q twice", name)
		}
		if !strings.HasPrefix(after, `"`) {
			return nil, "", fmt.Errorf("value of label %q is not quoted", name)
		}
		raw, rest, err := quoted(after[1:])
		if err != nil {
			return nil, "", fmt.Errorf("label %q: %w", name, err)
		}
		if labels[name], err = unescape(raw, true); err != nil {
			return nil, "", fmt.Errorf("label %q: %w", name, err)
		}
		switch {
		case strings.HasPrefix(rest, ","):
			s = rest[1:]
		case strings.HasPrefix(rest, "}"):
			s = rest
		default:
			return nil, "", fmt.Errorf("expected ',' or '}' after label %q", name)
		}
	}
}

// quoted returns the raw text up to the closing quote and what follows it.
func quoted(s string) (string, string, error) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return s[:i], s[i+1:], nil
		}
	}
	return "", "", fmt.Errorf("unterminated label value")
}

// unescape undoes \\ and \n, and \" in label values; any other escape,
// or a trailing lone backslash, is an error.
func unescape(s string, label bool) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 == len(s) {
			return "", fmt.Errorf("lone backslash at the end")
		}
		i++
		switch c := s[i]; {
		case c == '\\':
			b.WriteByte('\\')
		case c == 'n':
			b.WriteByte('\n')
		case c == '"' && label:
			b.WriteByte('"')
		default:
			return "", fmt.Errorf(`bad escape \%c`, c)
		}
	}
	return b.String(), nil
}

func parseValue(s string) (float64, error) {
	switch s {
	case "NaN":
		return math.NaN(), nil
	case "+Inf":
		return math.Inf(1), nil
	case "-Inf":
		return math.Inf(-1), nil
	}
	if !floatValue.MatchString(s) {
		return 0, fmt.Errorf("bad value %q", s)
	}
	return strconv.ParseFloat(s, 64)
}

func seriesKey(name string, labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.WriteString(name + "{")
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", k, labels[k])
	}
	b.WriteString("}")
	return b.String()
}

// Value returns the value of the sample of name with exactly these
// labels (name, value pairs).
func (d *Doc) Value(name string, labels ...string) (float64, bool) {
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	for _, f := range d.Families {
		for _, s := range f.Samples {
			if s.Name != name || len(s.Labels) != len(want) {
				continue
			}
			match := true
			for k, v := range want {
				if s.Labels[k] != v {
					match = false
				}
			}
			if match {
				return s.Value, true
			}
		}
	}
	return 0, false
}

// Samples returns every sample of name.
func (d *Doc) Samples(name string) []Sample {
	var out []Sample
	for _, f := range d.Families {
		for _, s := range f.Samples {
			if s.Name == name {
				out = append(out, s)
			}
		}
	}
	return out
}
