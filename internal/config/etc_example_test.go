package config

import (
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"testing"

	"github.com/BurntSushi/toml"
)

const examplePath = "../../etc/gpuhc.toml"

// The packaged file sets every key to its default, so installing it
// changes nothing; this catches the file and Default() drifting apart.
func TestExampleConfigIsTheDefault(t *testing.T) {
	c, err := Load(examplePath, "gpu001")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprintf("%+v", c), fmt.Sprintf("%+v", Default()); got != want {
		t.Errorf("etc/gpuhc.toml differs from Default():\n got  %s\n want %s", got, want)
	}
}

// commentedExample matches the examples that are off in etc/gpuhc.toml:
// "#" directly followed by a key or a table header.
var commentedExample = regexp.MustCompile(`(?m)^#([\[A-Za-z])`)

// With its examples switched on the file must still load, and between them
// the active and example lines must show every key of the schema.
func TestExampleConfigDocumentsEveryKey(t *testing.T) {
	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	on := commentedExample.ReplaceAll(data, []byte("$1"))
	c, err := Parse("gpuhc.toml (examples on)", on, "gpu020")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Checks.Modules.Required) == 0 || len(c.Checks.Mounts.Mount) != 1 {
		t.Errorf("host example did not apply to gpu020: %+v", c.Checks)
	}
	if _, err := Parse("gpuhc.toml (examples on)", on, "login1"); err != nil {
		t.Fatal(err)
	}

	var raw map[string]any
	md, err := toml.Decode(string(on), &raw)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, k := range md.Keys() {
		have[k.String()] = true
	}
	want := append(leafKeys(reflect.TypeFor[Config](), ""), "host.match")
	for _, k := range want {
		if !have[k] {
			t.Errorf("etc/gpuhc.toml does not show %q", k)
		}
	}
	if len(want) < 40 || !slices.Contains(want, "checks.mounts.mount.min_free") {
		t.Errorf("leafKeys found only %q", want)
	}
}

// leafKeys lists every non-table key of the schema.
func leafKeys(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name := tomlName(f)
		if f.Anonymous && name == "" {
			out = append(out, leafKeys(f.Type, prefix)...)
			continue
		}
		key := join(prefix, name)
		switch {
		case isTable(f.Type):
			out = append(out, leafKeys(f.Type, key)...)
		case isTableArray(f.Type):
			out = append(out, leafKeys(f.Type.Elem(), key)...)
		default:
			out = append(out, key)
		}
	}
	return out
}
