package config

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/gpuhc/gpuhc/internal/lazyre"
)

// typeCheck walks a generic decode of the file alongside the schema and
// reports every value the real decoder would reject, each at its own line.
// The decoder itself stops at the first bad value (picked in map order) and,
// inside [[arrays]], names the line of the last entry, not the bad one.
func (l *loader) typeCheck(raw map[string]any, t reflect.Type, key toml.Key, inst string) {
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		f, ok := fieldOf(t, k)
		if !ok {
			continue // reported as an unknown key
		}
		l.checkValue(raw[k], f.Type, append(slices.Clone(key), k), join(inst, k))
	}
}

func (l *loader) checkValue(v any, t reflect.Type, key toml.Key, inst string) {
	switch {
	case isTable(t):
		m, ok := v.(map[string]any)
		if !ok {
			l.addAt(inst, key.String(), "%s: want a table, found %s", key, describe(v))
			return
		}
		l.typeCheck(m, t, key, inst)
	case isTableArray(t):
		entries, ok := tableArray(v)
		if !ok {
			l.addAt(inst, key.String(), "%s: want an array of tables, found %s", key, describe(v))
			return
		}
		for i, m := range entries {
			l.typeCheck(m, t.Elem(), key, fmt.Sprintf("%s[%d]", inst, i))
		}
	default:
		if err := decodeAs(v, t); err != nil {
			l.addAt(inst, key.String(), "%s: want %s, found %s", key, wantName(t), describe(v))
		}
	}
}

// tableArray accepts both [[x]] entries and an inline array of tables.
func tableArray(v any) ([]map[string]any, bool) {
	switch a := v.(type) {
	case []map[string]any:
		return a, true
	case []any:
		out := make([]map[string]any, len(a))
		for i, e := range a {
			m, ok := e.(map[string]any)
			if !ok {
				return nil, false
			}
			out[i] = m
		}
		return out, true
	}
	return nil, false
}

// decodeAs asks the real decoder whether v fits a field of type t, so the
// check can never disagree with the decoding that follows.
func decodeAs(v any, t reflect.Type) error {
	if plainFit(v, t) {
		return nil
	}
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(map[string]any{"v": v}); err != nil {
		return nil // cannot tell; the real decoding will still complain
	}
	holder := reflect.New(reflect.StructOf([]reflect.StructField{
		{Name: "V", Type: t, Tag: `toml:"v"`},
	}))
	_, err := toml.Decode(buf.String(), holder.Interface())
	return err
}

var durationType = reflect.TypeFor[Duration]()

// plainFit answers decodeAs without a round trip through the decoder for
// the common leaves (a string, an in-range integer, a boolean into a plain
// field of that kind): the round trip is most of the cost of loading a
// file with thousands of [[host]] sections. Anything else, a type with its
// own text decoding above all, still asks the decoder.
func plainFit(v any, t reflect.Type) bool {
	if reflect.PointerTo(t).Implements(textUnmarshaler) {
		return false
	}
	switch x := v.(type) {
	case string:
		return t.Kind() == reflect.String
	case bool:
		return t.Kind() == reflect.Bool
	case int64:
		switch t.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			return !reflect.Zero(t).OverflowInt(x)
		}
	}
	return false
}

func wantName(t reflect.Type) string {
	if t == durationType {
		return `a duration such as "45s" or "1m30s"`
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array of " + plural(t.Elem())
	}
	return t.String()
}

func plural(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "strings"
	case reflect.Bool:
		return "booleans"
	case reflect.Float32, reflect.Float64:
		return "numbers"
	}
	return wantName(t) + " values"
}

// describe names a decoded TOML value for an error message.
func describe(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("string %q", capArgs([]any{x})...)
	case int64:
		return fmt.Sprintf("integer %d", x)
	case float64:
		return fmt.Sprintf("number %v", x)
	case bool:
		return fmt.Sprintf("boolean %v", x)
	case time.Time:
		return "date-time " + x.Format(time.RFC3339)
	case map[string]any:
		return "a table"
	case []map[string]any:
		return "an array of tables"
	case []any:
		return "an array"
	}
	return fmt.Sprintf("%T", v)
}

// tomlPrefix splits what BurntSushi puts before its message; only some of
// its errors are ParseErrors with a structured position.
var tomlPrefix = lazyre.New(`(?s)^toml: (?:line (\d+) )?(?:\(last key "((?:[^"\\]|\\.)*)"\): )?(.*)$`)

// tomlError turns a decoder error into an Error with whatever position and
// key it carries.
func (l *loader) tomlError(err error) *Error {
	e := &Error{File: l.file, Msg: err.Error()}
	var pe toml.ParseError
	if errors.As(err, &pe) {
		e.Line, e.Key, e.Msg = pe.Position.Line, pe.LastKey, pe.Message
	} else if m := tomlPrefix.FindStringSubmatch(err.Error()); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
		e.Key, e.Msg = unescape(m[2]), m[3]
	}
	if e.Key != "" {
		e.Msg = e.Key + ": " + e.Msg
	}
	return e
}

func unescape(s string) string {
	if u, err := strconv.Unquote(`"` + s + `"`); err == nil {
		return u
	}
	return s
}
