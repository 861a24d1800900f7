package configdoc

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/docslinks"
)

const (
	tomlPath = "../../../etc/gpuhc.toml"
	docPath  = "../../../docs/configuration.md"
)

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// (b) docs/configuration.md is what the generator writes now.
func TestReferenceIsCurrent(t *testing.T) {
	doc, err := Generate(config.Keys(), read(t, tomlPath))
	if err != nil {
		t.Fatal(err)
	}
	if have := read(t, docPath); have != string(doc)+"\n" {
		t.Errorf("docs/configuration.md is stale: run `make docs` (go generate ./internal/config/...)")
	}
}

// (a) Every key the loader knows has a heading, a type, a default and a
// description in the reference, and every anchor is unique.
func TestReferenceHasEveryKey(t *testing.T) {
	doc := read(t, docPath)
	sections := strings.Split(doc, "\n### ")
	byHeading := map[string]string{}
	for _, s := range sections[1:] {
		h, body, _ := strings.Cut(s, "\n")
		body, _, _ = strings.Cut(body, "\n## ")
		byHeading[h] = body
	}
	for _, k := range config.Keys() {
		if k.ArrayOfTables {
			if !strings.Contains(doc, "\n## [["+k.Key+"]]\n") {
				t.Errorf("%s: no section [[%s]]", k.Key, k.Key)
			}
			continue
		}
		body, ok := byHeading[heading(k)]
		if !ok {
			t.Errorf("%s: no heading %q", k.Key, heading(k))
			continue
		}
		paras := strings.Split(strings.TrimSpace(body), "\n\n")
		if !strings.HasPrefix(paras[0], "Type: ") || !strings.Contains(paras[0], "Default: ") {
			t.Errorf("%s: no type and default: %q", k.Key, paras[0])
		}
		if len(paras) < 2 || len(strings.TrimSpace(paras[1])) < 3 {
			t.Errorf("%s: no description", k.Key)
		}
	}
	seen := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#{1,4} (.+)$`).FindAllStringSubmatch(doc, -1) {
		a := docslinks.Slug(m[1])
		if seen[a] {
			t.Errorf("anchor #%s twice (heading %q)", a, m[1])
		}
		seen[a] = true
	}
	for _, a := range []string{"checksprocesses", "checksprocesses-required", "root", "checksmountsmount", "host"} {
		if !seen[a] {
			t.Errorf("no anchor #%s", a)
		}
	}
}

// A key missing from etc/gpuhc.toml, or one with no comment, stops the
// generator: the reference cannot lose a key silently.
func TestGenerateRefusesUndocumentedKeys(t *testing.T) {
	src := read(t, tomlPath)
	for _, c := range []struct{ cut, want string }{
		{"# Processes that must be running, by the name in /proc/<pid>/comm.\n", "checks.processes.required has no description"},
		{"retries = 3\n", "slurm.retries: not in etc/gpuhc.toml"},
	} {
		if !strings.Contains(src, c.cut) {
			t.Fatalf("etc/gpuhc.toml has no %q", c.cut)
		}
		_, err := Generate(config.Keys(), strings.Replace(src, c.cut, "", 1))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("without %q: err %v, want %q", c.cut, err, c.want)
		}
	}
	_, err := Generate(config.Keys(), strings.Replace(src, "retries = 3\n", "retries = 3\nretry = 3\n", 1))
	if err == nil || !strings.Contains(err.Error(), "slurm.retry is not a key the loader knows") {
		t.Errorf("with an unknown key: %v", err)
	}
}

// (c) Every key etc/gpuhc.toml sets, on or in an example, and every
// "# e.g." example, is a key the loader knows; every key it sets on is
// set to the code's default; and every "[table] key" its prose names is
// a key.
func TestShippedFileMatchesTheSchema(t *testing.T) {
	src := read(t, tomlPath)
	keys := config.Keys()
	ex, err := Parse(src, Shared(keys))
	if err != nil {
		t.Fatal(err)
	}
	info := map[string]config.KeyInfo{}
	for _, k := range keys {
		info[k.Key] = k
	}
	for key, kd := range ex.Keys {
		k, ok := info[key]
		if !ok {
			t.Errorf("line %d: %s is not a key the loader knows", kd.Line, key)
			continue
		}
		for _, e := range kd.Examples {
			if _, err := decodeAs(k.Type, e); err != nil {
				t.Errorf("%s: example %q: %v", key, e, err)
			}
		}
		if kd.Off {
			continue
		}
		v, err := decodeAs(k.Type, kd.Name+" = "+kd.Value)
		if err != nil {
			t.Errorf("line %d: %s: %v", kd.Line, key, err)
			continue
		}
		if !sameValue(v, k.Default) {
			t.Errorf("line %d: %s = %s, but the default is %s", kd.Line, key, kd.Value, tomlValue(k.Default))
		}
	}
	names := map[string]bool{}
	for _, k := range keys {
		names[k.Name] = true
	}
	// Prose names a key as "[table] key" ("As [prolog] lock_wait"); a
	// word that is no key's name ("[checks.ib.port] values") is prose.
	mention := regexp.MustCompile(`\[([a-z_.]+)\] ([a-z_]+)`)
	for i, line := range strings.Split(src, "\n") {
		if !strings.HasPrefix(line, "# ") {
			continue
		}
		for _, m := range mention.FindAllStringSubmatch(line, -1) {
			if _, ok := info[m[1]+"."+m[2]]; !ok && names[m[2]] {
				t.Errorf("line %d: mentions [%s] %s, not a key", i+1, m[1], m[2])
			}
		}
	}
}

func decodeAs(t reflect.Type, line string) (reflect.Value, error) {
	holder := reflect.New(reflect.StructOf([]reflect.StructField{{Name: "V", Type: t, Tag: `toml:"v"`}}))
	_, v, _ := strings.Cut(line, "=")
	_, err := toml.Decode("v ="+v, holder.Interface())
	return holder.Elem().Field(0), err
}

func sameValue(a, b reflect.Value) bool {
	if a.Kind() == reflect.Slice && a.Len() == 0 && b.Len() == 0 {
		return true
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}
