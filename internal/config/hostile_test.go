package config_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/config/configtest"
)

// TestHostileShapes loads every hostile shape at the size the file cap
// lets through. Each must be refused with the reason named, or load, and
// the error must stay short whatever the file holds. Time and memory are
// measured by `make bench` (docs/reliability.md), not asserted here.
func TestHostileShapes(t *testing.T) {
	size := config.MaxFile - 4096
	tests := map[string]string{ // shape → what the first problem says; "" loads
		"unknown-keys": "more than 50000 keys",
		"known-keys":   "more than 50000 keys",
		"hosts-at-cap": "",
		"keys-at-cap":  `unknown key "k0000000"`,
		"long-array":   "more than 100000 values",
		"deep-array":   "arrays and inline tables nested more than 32 deep",
		"deep-inline":  "a key of 33 parts",
		"deep-header":  "a key of more than 32 parts",
		"long-string":  "checks.gpu.count: want a table, found string",
		"long-key":     "a key part of",
	}
	for _, shape := range configtest.Shapes {
		want, ok := tests[shape]
		if !ok {
			t.Errorf("shape %s has no expectation", shape)
			continue
		}
		t.Run(shape, func(t *testing.T) {
			src := configtest.Shape(shape, size)
			if len(src) > config.MaxFile {
				t.Fatalf("shape is %d bytes, past the %d-byte file cap", len(src), config.MaxFile)
			}
			c, err := config.Parse("f.toml", []byte(src), "n5")
			if want == "" {
				if err != nil {
					t.Fatalf("a file within every limit was refused: %.500v", err)
				}
				if c.Deadline.Duration != 30*time.Second || c.Checks.GPU.Count.Expected != 8 {
					t.Errorf("host section n5 not applied: deadline %v, gpus %d", c.Deadline, c.Checks.GPU.Count.Expected)
				}
				return
			}
			var list config.ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("got %v, want an ErrorList", err)
			}
			if !strings.Contains(list[0].Msg, want) {
				t.Errorf("first problem %q does not say %q", list[0].Msg, want)
			}
			if n := len(err.Error()); n > 16<<10 {
				t.Errorf("error is %d bytes; it goes to slurmd's log on every interval", n)
			}
			for _, e := range list {
				if len(e.Msg) > 1024 {
					t.Errorf("one problem is %d bytes: %.120s…", len(e.Msg), e.Msg)
				}
			}
		})
	}
}
