package config

import (
	"encoding"
	"reflect"
	"strings"

	"github.com/BurntSushi/toml"
)

// hostSection is one [[host]] table: a match expression plus any part of
// the configuration.
type hostSection struct {
	Match string `toml:"match"`
	Config
}

// fileSchema describes every key a file may hold. The walkers below use it
// to spot unknown keys and to find the Go type behind a key.
type fileSchema struct {
	Config
	Host []hostSection `toml:"host"`
}

// fileDoc is what a file is decoded into. Host sections wait as Primitives
// until the base configuration they apply on top of is known.
type fileDoc struct {
	Config
	Host []toml.Primitive `toml:"host"`
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// isTable reports whether values of t are written as TOML tables; Duration
// is a struct but is written as a string.
func isTable(t reflect.Type) bool {
	return t.Kind() == reflect.Struct && !reflect.PointerTo(t).Implements(textUnmarshaler)
}

// isTableArray reports whether t is written as [[array]] entries.
func isTableArray(t reflect.Type) bool {
	return t.Kind() == reflect.Slice && isTable(t.Elem())
}

// fieldOf finds the field whose TOML name is exactly name, looking through
// untagged embedded structs as the decoder does. The decoder would also
// accept "Deadline" for "deadline"; strict loading does not.
func fieldOf(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := tomlName(f)
		if !f.IsExported() || tag == "-" {
			continue
		}
		if f.Anonymous && tag == "" && isTable(f.Type) {
			if g, ok := fieldOf(f.Type, name); ok {
				g.Index = append([]int{i}, g.Index...)
				return g, true
			}
			continue
		}
		if tag == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func tomlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
	if name == "" && !f.Anonymous {
		return f.Name
	}
	return name
}

// knownKey reports whether the schema rooted at t has exactly this key.
func knownKey(t reflect.Type, key toml.Key) bool {
	for _, part := range key {
		if isTableArray(t) {
			t = t.Elem()
		}
		if !isTable(t) {
			return false
		}
		f, ok := fieldOf(t, part)
		if !ok {
			return false
		}
		t = f.Type
	}
	return true
}

// dropSetSlices empties every slice that raw sets in v, so that decoding raw
// on top replaces arrays instead of merging them element by element. The
// decoder reuses a slice's backing array, which would also write through
// to the configuration v was copied from.
func dropSetSlices(v reflect.Value, raw map[string]any) {
	for k, val := range raw {
		f, ok := fieldOf(v.Type(), k)
		if !ok {
			continue
		}
		fv := v.FieldByIndex(f.Index)
		switch {
		case fv.Kind() == reflect.Slice:
			fv.SetZero()
		case isTable(fv.Type()):
			if m, ok := val.(map[string]any); ok {
				dropSetSlices(fv, m)
			}
		}
	}
}
