package config

import (
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
)

// maxDigits bounds the numbers in a hostlist range so that they, and the
// product of range sizes, fit comfortably in a uint64.
const maxDigits = 9

// HostList is a parsed host match expression: a comma-separated list of
// Slurm hostlist expressions ("gpu[001-016,020]", "rack[1-2]-gpu[01-04]")
// and shell globs ("gpu*", "login?"). Brackets always mean numeric ranges,
// never glob character classes, so a pattern cannot mix the two.
type HostList struct {
	pats []hostPattern
}

// hostPattern is one element of a HostList: a glob, or a hostlist
// expression as literal and range segments.
type hostPattern struct {
	glob string
	segs []segment
}

// segment is literal text, or a bracketed set of ranges when ranges != nil.
type segment struct {
	lit    string
	ranges []numRange
}

// numRange is lo..hi, each printed zero-padded to width digits, as Slurm
// does: "001-016" has width 3.
type numRange struct {
	lo, hi uint64
	width  int
}

// ParseHostList parses a match expression. It never expands ranges, so
// "gpu[0-999999999]" costs no memory.
func ParseHostList(expr string) (HostList, error) {
	elems, err := splitHostList(expr)
	if err != nil {
		return HostList{}, err
	}
	var h HostList
	for _, e := range elems {
		p, err := parsePattern(e)
		if err != nil {
			return HostList{}, errorf("%q: %w", e, err)
		}
		h.pats = append(h.pats, p)
	}
	return h, nil
}

// Match reports whether node is named by any element of the list.
func (h HostList) Match(node string) bool {
	for _, p := range h.pats {
		if p.match(node) {
			return true
		}
	}
	return false
}

// ExpandHostList lists every name a hostlist expression stands for, in
// order. It refuses globs (they name no finite set) and refuses to produce
// more than limit names.
func ExpandHostList(expr string, limit int) ([]string, error) {
	if limit < 1 {
		return nil, errorf("expansion limit %d: want at least 1", limit)
	}
	h, err := ParseHostList(expr)
	if err != nil {
		return nil, err
	}
	total := uint64(0)
	for _, p := range h.pats {
		if p.glob != "" {
			return nil, errorf("%q: a glob cannot be expanded", p.glob)
		}
		total += p.count(uint64(limit) + 1)
		if total > uint64(limit) {
			return nil, errorf("%q names more than %d hosts", expr, limit)
		}
	}
	var out []string
	for _, p := range h.pats {
		out = expandSegs(p.segs, "", out)
	}
	return out, nil
}

// splitHostList splits at commas outside brackets.
func splitHostList(expr string) ([]string, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, errors.New("empty host list")
	}
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(expr); i++ {
		switch expr[i] {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, expr[start:i])
				start = i + 1
			}
		}
	}
	out = append(out, expr[start:])
	for i, e := range out {
		out[i] = strings.TrimSpace(e)
		if out[i] == "" {
			return nil, errorf("host list %q has an empty element", expr)
		}
	}
	return out, nil
}

func parsePattern(e string) (hostPattern, error) {
	if strings.ContainsAny(e, " \t\r\n") {
		return hostPattern{}, errors.New("contains white space")
	}
	hasRange := strings.ContainsAny(e, "[]")
	if strings.ContainsAny(e, "*?\\") {
		if hasRange {
			return hostPattern{}, errors.New("mixes a glob (*, ?) with a hostlist range ([...]); write them as separate elements")
		}
		if _, err := path.Match(e, ""); err != nil {
			return hostPattern{}, errorf("bad glob: %w", err)
		}
		return hostPattern{glob: e}, nil
	}
	segs, err := parseSegments(e)
	return hostPattern{segs: segs}, err
}

// parseSegments cuts "rack[1-2]-gpu[01-04]" into literal and range parts.
func parseSegments(e string) ([]segment, error) {
	var segs []segment
	for e != "" {
		open := strings.IndexAny(e, "[]")
		if open < 0 {
			return append(segs, segment{lit: e}), nil
		}
		if e[open] == ']' {
			return nil, errors.New("']' without '['")
		}
		if open > 0 {
			segs = append(segs, segment{lit: e[:open]})
		}
		end := strings.IndexAny(e[open+1:], "[]")
		if end < 0 || e[open+1+end] == '[' {
			return nil, errors.New("'[' without ']'")
		}
		rs, err := parseRanges(e[open+1 : open+1+end])
		if err != nil {
			return nil, err
		}
		segs = append(segs, segment{ranges: rs})
		e = e[open+end+2:]
	}
	return segs, nil
}

// parseRanges reads the inside of brackets: "001-016,020".
func parseRanges(s string) ([]numRange, error) {
	if s == "" {
		return nil, errors.New("empty brackets")
	}
	var out []numRange
	for _, part := range strings.Split(s, ",") {
		r, err := parseRange(part)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func parseRange(part string) (numRange, error) {
	loS, hiS, isRange := strings.Cut(part, "-")
	if !isRange {
		hiS = loS
	}
	lo, err := parseNum(loS)
	if err != nil {
		return numRange{}, errorf("range %q: %w", part, err)
	}
	hi, err := parseNum(hiS)
	if err != nil {
		return numRange{}, errorf("range %q: %w", part, err)
	}
	if hi < lo {
		return numRange{}, errorf("range %q runs backwards", part)
	}
	// Slurm takes the width from the low end; a differently padded high
	// end ("1-016") is ambiguous, so refuse it rather than guess.
	if len(hiS) > 1 && hiS[0] == '0' && len(hiS) != len(loS) {
		return numRange{}, errorf("range %q: both ends must have the same zero padding", part)
	}
	return numRange{lo: lo, hi: hi, width: len(loS)}, nil
}

func parseNum(s string) (uint64, error) {
	if s == "" {
		return 0, errors.New("missing number")
	}
	if len(s) > maxDigits {
		return 0, errorf("%q has more than %d digits", s, maxDigits)
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, errorf("%q is not a number", s)
		}
	}
	return strconv.ParseUint(s, 10, 64)
}

func (p hostPattern) match(node string) bool {
	if p.glob != "" {
		ok, _ := path.Match(p.glob, node)
		return ok
	}
	return matchSegs(p.segs, node)
}

// matchSegs matches without expanding: a range segment tries each leading
// run of digits, since "gpu[1-2][0-9]" leaves the split point open. Each
// (segment, offset) pair is tried once: without that, a list of many
// ranges ("[1-999999999]" ten times) against a long name of digits tries
// every way to cut the name, minutes of work on every run.
func matchSegs(segs []segment, s string) bool {
	failed := map[[2]int]bool{}
	var match func(i, at int) bool
	match = func(i, at int) bool {
		if i == len(segs) {
			return at == len(s)
		}
		if failed[[2]int{i, at}] {
			return false
		}
		sg, rest := segs[i], s[at:]
		if sg.ranges == nil {
			if strings.HasPrefix(rest, sg.lit) && match(i+1, at+len(sg.lit)) {
				return true
			}
		} else {
			for n := 1; n <= len(rest) && n <= maxDigits && rest[n-1] >= '0' && rest[n-1] <= '9'; n++ {
				if sg.has(rest[:n]) && match(i+1, at+n) {
					return true
				}
			}
		}
		failed[[2]int{i, at}] = true
		return false
	}
	return match(0, 0)
}

// has reports whether digits is exactly how one of the ranges prints a number.
func (sg segment) has(digits string) bool {
	v, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return false
	}
	for _, r := range sg.ranges {
		if v >= r.lo && v <= r.hi && r.format(v) == digits {
			return true
		}
	}
	return false
}

func (r numRange) format(v uint64) string { return fmt.Sprintf("%0*d", r.width, v) }

// count is the number of names the pattern stands for, saturating at ceil.
func (p hostPattern) count(ceil uint64) uint64 {
	n := uint64(1)
	for _, sg := range p.segs {
		k := uint64(0)
		for _, r := range sg.ranges {
			k += r.hi - r.lo + 1
		}
		if sg.ranges == nil {
			k = 1
		}
		if n > ceil/k {
			return ceil
		}
		n *= k
	}
	return n
}

func expandSegs(segs []segment, prefix string, out []string) []string {
	if len(segs) == 0 {
		return append(out, prefix)
	}
	sg := segs[0]
	if sg.ranges == nil {
		return expandSegs(segs[1:], prefix+sg.lit, out)
	}
	for _, r := range sg.ranges {
		for v := r.lo; v <= r.hi; v++ {
			out = expandSegs(segs[1:], prefix+r.format(v), out)
		}
	}
	return out
}
