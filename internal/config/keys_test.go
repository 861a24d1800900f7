package config

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

// Keys is what the reference documents, so it must be exactly the keys
// the loader accepts: each one known, each leaf one the test's own walk
// of the schema finds, and a key one letter off unknown.
func TestKeysAreTheLoadersKeys(t *testing.T) {
	schema := reflect.TypeFor[fileSchema]()
	var leaves []string
	for _, k := range Keys() {
		key := toml.Key(k.path)
		if k.Key == "host" || k.Key == "host.match" {
			key = toml.Key{"host"}
			if k.Key == "host.match" {
				key = toml.Key{"host", "match"}
			}
		}
		if !knownKey(schema, key) {
			t.Errorf("%s: not a key the loader knows", k.Key)
		}
		if knownKey(schema, append(slices.Clone(key[:len(key)-1]), key[len(key)-1]+"x")) {
			t.Errorf("%s: the loader knows %sx too", k.Key, k.Key)
		}
		if !k.Host && k.Table != "host" && k.Key != "host" {
			t.Errorf("%s: a [[host]] section cannot set it", k.Key)
		}
		if !k.ArrayOfTables && k.Key != "host.match" {
			leaves = append(leaves, k.Key)
		}
	}
	if want := leafKeys(reflect.TypeFor[Config](), ""); !slices.Equal(leaves, want) {
		t.Errorf("Keys() leaves:\n %q\nwant\n %q", leaves, want)
	}
}

func TestKeysDefaults(t *testing.T) {
	got := map[string]any{}
	for _, k := range Keys() {
		got[k.Key] = k.Default.Interface()
	}
	for key, want := range map[string]any{
		"deadline":                               Duration{Default().Deadline.Duration},
		"checks.thermal.fail_celsius":            95.0,
		"checks.gpu.count.expected":              -1,
		"checks.mounts.mount.path":               "",
		"prolog.checks":                          Default().Prolog.Checks,
		"checks.fabric.manager.max_read":         "4MiB",
		"checks.gpu.xid.override.escalate_after": 0,
	} {
		if !reflect.DeepEqual(got[key], want) {
			t.Errorf("%s: default %#v, want %#v", key, got[key], want)
		}
	}
}

// A number whose name says it has a unit carries that unit, so the
// reference can show it.
func TestKeysUnits(t *testing.T) {
	for _, k := range Keys() {
		for _, suffix := range []string{"_celsius", "_gbps", "_mib", "_bytes"} {
			if strings.HasSuffix(k.Name, suffix) && k.Unit == "" {
				t.Errorf("%s: no unit tag", k.Key)
			}
		}
	}
}
