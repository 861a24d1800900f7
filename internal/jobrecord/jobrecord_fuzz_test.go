package jobrecord

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// Any job id (from the job's environment) and any record file: Load reads
// only a record under the store named by a canonical id, returns only
// that job's record, and what it returns saves and loads back the same.
func FuzzLoad(f *testing.F) {
	f.Add("42", []byte(`{"job_id":"42","uid":1001,"start":"2023-11-14T22:13:20Z","boot_id":"b1","kmsg_next":17,"kmsg_ok":true,"gpus":[{"pci":"0000:18:00.0","index":0,"dbe":0}]}`))
	f.Add("42", []byte(`{"job_id":"43"}`))
	f.Add("../42", []byte(`{"job_id":"../42"}`))
	f.Add("7", []byte(`{"job_id":"7","start":"2023-11-14T22:13:20+01:00","gpus":[{"remap_corr":-1,"dbe":18446744073709551615}]}`))
	f.Add("007", []byte(`{}`))
	s := Store{Dir: f.TempDir()}
	f.Fuzz(func(t *testing.T, id string, data []byte) {
		p, perr := s.path(id)
		if perr == nil {
			if filepath.Dir(p) != s.Dir {
				t.Fatalf("job %q has its record at %s", id, p)
			}
			if err := os.WriteFile(p, data, 0o600); err != nil {
				t.Fatal(err)
			}
			defer os.Remove(p)
		}
		r, err := s.Load(id)
		if err != nil {
			return
		}
		if perr != nil || r.JobID != id {
			t.Fatalf("Load(%q) of %q = %+v", id, data, r)
		}
		if err := s.Save(r); err != nil {
			t.Fatal(err)
		}
		back, err := s.Load(id)
		if err != nil || !back.Start.Equal(r.Start) {
			t.Fatalf("Load(%q) = %+v; saved and loaded: %+v, %v", id, r, back, err)
		}
		back.Start, r.Start = time.Time{}, time.Time{}
		if len(r.GPUs) == 0 {
			r.GPUs = nil // "gpus":[] is saved as no gpus (omitempty)
		}
		if !reflect.DeepEqual(back, r) {
			t.Fatalf("Load(%q) = %+v; saved and loaded: %+v", id, r, back)
		}
	})
}
