package slurm

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

const testComment = `gpuhc: gpu3 (SN 1654922000003) XID 79; "node" $(drained); rm -rf /`

// The REST body is {"admin_comment": ...} and nothing else, on the write
// version; slurmctld's refusal of a completing job, recorded on 24.11
// (HTTP 500) and 26.05 (HTTP 422), is ErrJobFinished and not retried.
func TestRESTSetAdminCommentRecorded(t *testing.T) {
	for _, c := range []struct{ release, version, finished, unknown string }{
		{"slurm-24.11", "v0.0.42", "post_job_finished.500.json", "post_job_unknown.404.json"},
		{"slurm-26.05", "v0.0.45", "post_job_finished.422.json", "post_job_unknown.404.json"},
	} {
		t.Run(c.release, func(t *testing.T) {
			f := newFake()
			openapiRoute(t, f, c.release)
			f.on("POST", "/slurm/"+c.version+"/job/42", reply{200, []byte(`{"results":[{"job_id":42}],"errors":[],"warnings":[]}`)})
			f.on("POST", "/slurm/"+c.version+"/job/1", reply{status(c.finished), restFixture(t, c.release, c.version+"/"+c.finished)})
			f.on("POST", "/slurm/"+c.version+"/job/99999", reply{status(c.unknown), restFixture(t, c.release, c.version+"/"+c.unknown)})
			r := newTestREST(t, serve(t, f))
			if err := r.SetAdminComment(t.Context(), "42", testComment); err != nil {
				t.Fatal(err)
			}
			reqs := f.requests()
			var body map[string]any
			if err := json.Unmarshal([]byte(reqs[len(reqs)-1].body), &body); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(body, map[string]any{"admin_comment": testComment}) || reqs[len(reqs)-1].contentType != "application/json" {
				t.Errorf("body %v (%s)", body, reqs[len(reqs)-1].contentType)
			}
			err := r.SetAdminComment(t.Context(), "1", testComment)
			if !errors.Is(err, ErrJobFinished) || !strings.Contains(err.Error(), "Job has already finished") {
				t.Errorf("finished job: %v", err)
			}
			if n := f.count("POST", "/slurm/"+c.version+"/job/1"); n != 1 {
				t.Errorf("a finished job was tried %d times", n)
			}
			if err := r.SetAdminComment(t.Context(), "99999", testComment); !errors.Is(err, ErrJobNotFound) {
				t.Errorf("unknown job: %v", err)
			}
		})
	}
}

func status(file string) int {
	var code int
	parts := strings.Split(file, ".")
	json.Unmarshal([]byte(parts[len(parts)-2]), &code)
	return code
}

// scontrol gets one argument per field, the comment whole however many
// spaces and quotes it holds; the recorded refusals map to the errors.
func TestScontrolSetAdminComment(t *testing.T) {
	f := newFakeScontrol(t)
	s := newTestScontrol(t, f)
	if err := s.SetAdminComment(t.Context(), "4242", testComment); err != nil {
		t.Fatal(err)
	}
	if got, want := f.argv(0), []string{"update", "JobId=4242", "AdminComment=" + testComment}; !reflect.DeepEqual(got, want) {
		t.Errorf("argv %q, want %q", got, want)
	}
	for _, release := range []string{"slurm-22.05", "slurm-24.11", "slurm-26.05"} {
		f.recorded(-1, release, "update_job_finished")
		if err := s.SetAdminComment(t.Context(), "1", testComment); !errors.Is(err, ErrJobFinished) {
			t.Errorf("%s: %v", release, err)
		}
	}
	f.recorded(-1, "slurm-26.05", "update_job_unknown")
	if err := s.SetAdminComment(t.Context(), "99999", testComment); !errors.Is(err, ErrJobNotFound) || errors.Is(err, ErrJobFinished) {
		t.Errorf("unknown: %v", err)
	}
}

// Unsafe ids and comments are refused before anything runs.
func TestSetAdminCommentRefusesBadInput(t *testing.T) {
	f := newFakeScontrol(t)
	s := newTestScontrol(t, f)
	for _, c := range []struct{ id, comment string }{
		{"", "x"}, {"12;reboot", "x"}, {"42 AdminComment=x", "x"}, {"4_2", "x"}, {"12345678901", "x"},
		{"42", ""}, {"42", "  "}, {"42", "two\nlines"}, {"42", strings.Repeat("x", maxComment+1)},
	} {
		if err := s.SetAdminComment(t.Context(), c.id, c.comment); err == nil {
			t.Errorf("%q %q accepted", c.id, c.comment)
		}
	}
	if n := f.runs(); n != 0 {
		t.Errorf("scontrol ran %d times", n)
	}
}

// In auto mode a refusal by slurmctld over REST is final: scontrol would
// only repeat it. A slurmrestd that cannot POST (22.05) falls back.
func TestClientSetAdminCommentFallback(t *testing.T) {
	b := newBed(t, "auto", func(f *fakeSlurmrestd) {
		openapiRoute(t, f, "slurm-24.11")
		f.on("POST", "/slurm/v0.0.42/job/1", reply{500, restFixture(t, "slurm-24.11", "v0.0.42/post_job_finished.500.json")})
	})
	if err := b.c.SetAdminComment(t.Context(), "1", testComment); !errors.Is(err, ErrJobFinished) {
		t.Fatalf("err %v", err)
	}
	if n := b.sc.runs(); n != 0 {
		t.Errorf("scontrol ran %d times after a definite REST answer", n)
	}

	b = newBed(t, "auto", func(f *fakeSlurmrestd) { openapiRoute(t, f, "slurm-22.05") })
	b.sc.recorded(-1, "slurm-22.05", "update_job_finished")
	if err := b.c.SetAdminComment(t.Context(), "1", testComment); !errors.Is(err, ErrJobFinished) {
		t.Fatalf("22.05: %v", err)
	}
	if got := b.sc.argv(0); len(got) != 3 || got[1] != "JobId=1" || b.c.Backend() != "scontrol" {
		t.Errorf("22.05: argv %q backend %s", got, b.c.Backend())
	}
}
