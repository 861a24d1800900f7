package config

import (
	"slices"
	"strings"
	"testing"
)

func TestHostListMatch(t *testing.T) {
	tests := []struct {
		expr string
		yes  []string
		no   []string
	}{
		{"gpu[001-016,020]", []string{"gpu001", "gpu009", "gpu016", "gpu020"},
			[]string{"gpu017", "gpu000", "gpu1", "gpu01", "gpu0001", "GPU001", "gpu001x", "xgpu001", "gpu"}},
		{"gpu[1-16]", []string{"gpu1", "gpu9", "gpu10", "gpu16"}, []string{"gpu01", "gpu17", "gpu0"}},
		{"gpu[8-12]", []string{"gpu8", "gpu9", "gpu10", "gpu12"}, []string{"gpu08", "gpu13", "gpu7"}},
		{"gpu[01-100]", []string{"gpu01", "gpu99", "gpu100"}, []string{"gpu1", "gpu001", "gpu101", "gpu00"}},
		{"gpu[5]", []string{"gpu5"}, []string{"gpu05", "gpu4"}},
		{"rack[1-2]-gpu[01-04]", []string{"rack1-gpu01", "rack2-gpu04"},
			[]string{"rack3-gpu01", "rack1-gpu05", "rack1-gpu1", "rack1gpu01"}},
		// The split between two adjacent ranges is found by backtracking.
		{"gpu[1-2][0-9]", []string{"gpu10", "gpu15", "gpu29"}, []string{"gpu30", "gpu1", "gpu100"}},
		{"node7", []string{"node7"}, []string{"node70", "node"}},
		{"login*,gpu[1-2]", []string{"login", "login01", "gpu2"}, []string{"gpu3", "xlogin"}},
		{" gpu1 , gpu2 ", []string{"gpu1", "gpu2"}, []string{"gpu3"}},
		{"gpu?", []string{"gpu1"}, []string{"gpu10", "gpu"}},
		{"a[1-3],b[1,3]", []string{"a2", "b1", "b3"}, []string{"b2", "a4"}},
		// A huge range matches without being expanded.
		{"gpu[0-999999999]", []string{"gpu0", "gpu123456789", "gpu999999999"}, []string{"gpu1000000000", "gpu01"}},
		{"gpu[001-016]-ib", []string{"gpu003-ib"}, []string{"gpu003", "gpu003-ib0"}},
	}
	for _, tt := range tests {
		h, err := ParseHostList(tt.expr)
		if err != nil {
			t.Errorf("ParseHostList(%q): %v", tt.expr, err)
			continue
		}
		for _, n := range tt.yes {
			if !h.Match(n) {
				t.Errorf("%q should match %q", tt.expr, n)
			}
		}
		for _, n := range tt.no {
			if h.Match(n) {
				t.Errorf("%q should not match %q", tt.expr, n)
			}
		}
	}
}

func TestParseHostListErrors(t *testing.T) {
	tests := []struct{ expr, want string }{
		{"gpu[5-1]", `range "5-1" runs backwards`},
		{"gpu[", "'[' without ']'"},
		{"gpu[1-2", "'[' without ']'"},
		{"gpu[[1-2]]", "'[' without ']'"},
		{"gpu]", "']' without '['"},
		{"gpu[a-b]", `"a" is not a number`},
		{"gpu[1-x]", `"x" is not a number`},
		{"gpu[]", "empty brackets"},
		{"gpu[1-]", "missing number"},
		{"gpu[-3]", "missing number"},
		{"gpu[1,,3]", "missing number"},
		{"gpu[1-016]", "same zero padding"},
		{"gpu[1234567890]", "more than 9 digits"},
		{"gpu[1-2]*", "mixes a glob"},
		{"gpu\\", "bad glob"},
		{"gpu 1", "white space"},
		{"", "empty host list"},
		{" ", "empty host list"},
		{"gpu1,,gpu2", "empty element"},
		{"gpu1,", "empty element"},
	}
	for _, tt := range tests {
		_, err := ParseHostList(tt.expr)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseHostList(%q) = %v, want error containing %q", tt.expr, err, tt.want)
		}
	}
}

func TestExpandHostList(t *testing.T) {
	tests := []struct {
		expr  string
		limit int
		want  []string
		err   string
	}{
		{"gpu[001-003,007]", 100, []string{"gpu001", "gpu002", "gpu003", "gpu007"}, ""},
		{"r[1-2]-g[1-2]", 100, []string{"r1-g1", "r1-g2", "r2-g1", "r2-g2"}, ""},
		{"a,b[9-10]", 100, []string{"a", "b9", "b10"}, ""},
		{"gpu[1-4]", 4, []string{"gpu1", "gpu2", "gpu3", "gpu4"}, ""},
		{"gpu[1-4]", 3, nil, "more than 3 hosts"},
		{"gpu[1-2],gpu[3-4]", 3, nil, "more than 3 hosts"},
		{"gpu[0-999999999]", 100000, nil, "more than 100000 hosts"},
		{"a[0-999999999][0-999999999][0-999999999]", 10, nil, "more than 10 hosts"},
		{"gpu*", 10, nil, "glob cannot be expanded"},
		{"gpu[2-1]", 10, nil, "backwards"},
		{"gpu1", 0, nil, "limit"},
	}
	for _, tt := range tests {
		got, err := ExpandHostList(tt.expr, tt.limit)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ExpandHostList(%q, %d) error = %v, want %q", tt.expr, tt.limit, err, tt.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("ExpandHostList(%q, %d) = %q, %v; want %q", tt.expr, tt.limit, got, err, tt.want)
		}
	}
}

// Every expanded name must match, and matching must agree with expansion.
func TestHostListMatchAgreesWithExpand(t *testing.T) {
	for _, expr := range []string{"gpu[001-016,020]", "n[8-12]", "r[1-2]-g[01-04]", "x[1-2][0-9]", "h[01-100]"} {
		names, err := ExpandHostList(expr, 1000)
		if err != nil {
			t.Fatal(err)
		}
		h, _ := ParseHostList(expr)
		for _, n := range names {
			if !h.Match(n) {
				t.Errorf("%q expands to %q but does not match it", expr, n)
			}
		}
	}
}
