package ib

import (
	"cmp"
	"slices"
	"strings"

	"github.com/gpuhc/gpuhc/internal/check"
)

// verdict gathers what one component showed. Its result is the worst
// status seen, with the most severe findings first so that they survive
// the drain reason's 256-byte cut.
type verdict struct {
	name, comp string
	findings   []finding
}

type finding struct {
	status check.Status
	msg    string
}

func (v *verdict) add(st check.Status, msg string) {
	v.findings = append(v.findings, finding{st, msg})
}

// result returns the verdict, or OK with okMsg when nothing was found.
func (v *verdict) result(okMsg string) check.Result {
	if len(v.findings) == 0 {
		return result(v.name, v.comp, check.OK, "%s", okMsg)
	}
	fs := slices.Clone(v.findings)
	slices.SortStableFunc(fs, func(a, b finding) int { return cmp.Compare(b.status, a.status) })
	msgs := make([]string, len(fs))
	for i, f := range fs {
		msgs[i] = f.msg
	}
	return result(v.name, v.comp, fs[0].status, "%s", strings.Join(msgs, "; "))
}

// errText makes an error one line: errors.Join separates with newlines.
func errText(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}
