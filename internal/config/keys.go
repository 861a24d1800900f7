package config

import (
	"reflect"

	"github.com/BurntSushi/toml"
)

// KeyInfo is one key of the schema the strict loader checks files
// against (fileSchema), for tools that document or test it: the
// configuration reference is generated from this list.
type KeyInfo struct {
	Key   string       // dotted, as errors spell it: "checks.mounts.mount.path"
	Table string       // the table it is written in: "checks.mounts.mount"; "" at the top
	Name  string       // the last part: "path"
	Type  reflect.Type // the Go type its value decodes into
	// Unit is the unit of a number or size, from the field's unit tag
	// ("°C", "GB/s"); durations carry their own.
	Unit string
	// Entries: Table is an array of tables ([[checks.mounts.mount]]), and
	// each entry sets the key on its own.
	Entries bool
	// ArrayOfTables: the key itself is an array of tables (Type is a
	// slice of structs); its keys follow it in the list.
	ArrayOfTables bool
	// Default is the value a configuration has when no file sets the key:
	// Default()'s, or the zero value in an array entry.
	Default reflect.Value
	// Host: a [[host]] section may set it (as host.<Key>).
	Host bool
	// Field names the Go struct field, "Common.Enabled": keys that share
	// one (every check's enabled) share their meaning.
	Field string

	path toml.Key
}

// Keys lists every key of the schema in declaration order, each table's
// keys after the keys and tables before it; [[host]] comes last, with
// only its own key, match (its other keys are the ones listed, see Host).
func Keys() []KeyInfo {
	var out []KeyInfo
	walkKeys(&out, reflect.TypeFor[Config](), reflect.ValueOf(Default()), nil, false)
	schema := reflect.TypeFor[fileSchema]()
	for i := range out {
		out[i].Host = knownKey(schema, append(toml.Key{"host"}, out[i].path...))
	}
	host := reflect.TypeFor[hostSection]()
	f, _ := fieldOf(host, "match")
	out = append(out,
		KeyInfo{Key: "host", Name: "host", Type: reflect.TypeFor[[]hostSection](), ArrayOfTables: true,
			Default: reflect.ValueOf([]hostSection(nil)), Field: "fileSchema.Host"},
		KeyInfo{Key: "host.match", Table: "host", Name: "match", Type: f.Type, Entries: true,
			Default: reflect.Zero(f.Type), Field: host.Name() + "." + f.Name})
	return out
}

func walkKeys(out *[]KeyInfo, t reflect.Type, v reflect.Value, table toml.Key, entries bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		name := tomlName(f)
		if !f.IsExported() || name == "-" {
			continue
		}
		fv := v.Field(i)
		if f.Anonymous && name == "" && isTable(f.Type) {
			walkKeys(out, f.Type, fv, table, entries)
			continue
		}
		key := append(append(toml.Key{}, table...), name)
		switch {
		case isTable(f.Type):
			walkKeys(out, f.Type, fv, key, entries)
		case isTableArray(f.Type):
			*out = append(*out, KeyInfo{Key: key.String(), Table: table.String(), Name: name, Type: f.Type,
				Entries: entries, ArrayOfTables: true, Default: fv, Field: t.Name() + "." + f.Name, path: key})
			walkKeys(out, f.Type.Elem(), reflect.Zero(f.Type.Elem()), key, true)
		default:
			*out = append(*out, KeyInfo{Key: key.String(), Table: table.String(), Name: name, Type: f.Type,
				Entries: entries, Default: fv, Field: t.Name() + "." + f.Name, Unit: f.Tag.Get("unit"), path: key})
		}
	}
}
