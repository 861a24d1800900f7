package statefile

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// Any record on disk (a crash mid-write, a disk error, a hand edit): Load
// takes JSON or says ErrCorrupt, and what it took saves and loads back
// the same, so a check's state survives its round trip between runs.
func FuzzLoad(f *testing.F) {
	for _, s := range []string{`{"boot_id":"b","next":12,"ports":{"mlx5_0/1":{"symbol_error":3}}}`, ``, `null`, `{`, `[1,2]`, `"x"`, `{"a":1e400}`, "{\"a\":\"\xff\"}", `{"a":1}{}`} {
		f.Add([]byte(s))
	}
	d := Dir{Path: f.TempDir()}
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(filepath.Join(d.Path, "rec.json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		var v any
		err := d.Load("rec.json", &v)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) || json.Valid(b) && json.Unmarshal(b, new(any)) == nil {
				t.Fatalf("Load(%q): %v", b, err)
			}
			return
		}
		if !json.Valid(b) {
			t.Fatalf("Load(%q) took invalid JSON as %#v", b, v)
		}
		if err := d.Save("rec.json", v); err != nil {
			t.Fatal(err)
		}
		var back any
		if err := d.Load("rec.json", &back); err != nil || !reflect.DeepEqual(back, v) {
			t.Fatalf("Load(%q) = %#v; saved and loaded: %#v, %v", b, v, back, err)
		}
	})
}
