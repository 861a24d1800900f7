package slurm

import (
	"errors"
	"strings"
	"testing"
)

func TestPickVersionsRecorded(t *testing.T) {
	v, err := pickVersions(restFixture(t, "slurm-24.11", "openapi.200.json"))
	if err != nil {
		t.Fatal(err)
	}
	if v.write != "v0.0.42" || v.read != "v0.0.42" {
		t.Errorf("24.11: read %q write %q, want v0.0.42 for both", v.read, v.write)
	}
	for _, s := range []string{"v0.0.40(", "v0.0.41(", "v0.0.42("} {
		if !strings.Contains(v.seen, s) {
			t.Errorf("24.11: seen %q lacks %s", v.seen, s)
		}
	}

	v, err = pickVersions(restFixture(t, "slurm-22.05", "openapi.200.json"))
	if err != nil {
		t.Fatal(err)
	}
	if v.write != "" || v.read != "v0.0.38" {
		t.Errorf("22.05: read %q write %q, want v0.0.38 and none", v.read, v.write)
	}
	if strings.Contains(v.seen, "POST") {
		t.Errorf("22.05: seen %q mentions POST", v.seen)
	}
}

func TestPickVersionsHandBuilt(t *testing.T) {
	doc := `{"paths":{
		"/slurm/v0.0.39/node/{node_name}":{"get":{},"post":{}},
		"/slurm/v0.0.43/node/{node_name}":{"get":{}},
		"/slurm/v0.0.38/node/{node_name}":{"get":{},"post":{}},
		"/slurm/v0.0.44/nodes/":{"post":{}},
		"/slurm/v0.0.45/node/{node_name}/extra":{"post":{}}}}`
	v, err := pickVersions([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	// 43 has no post, 38 is below 39 whatever it claims, 44/45 are other paths.
	if v.write != "v0.0.39" || v.read != "v0.0.43" {
		t.Errorf("read %q write %q", v.read, v.write)
	}
	for _, bad := range []string{`{}`, `{"paths":{}}`, `not json`, `{"paths":{"/slurm/v0.0.42/jobs/":{"get":{}}}}`} {
		if _, err := pickVersions([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

func TestWriteVersion2205IsNoNodePost(t *testing.T) {
	f := newFake()
	openapiRoute(t, f, "slurm-22.05")
	r := newTestREST(t, serve(t, f))
	_, err := r.writeVersion(t.Context())
	if !errors.Is(err, ErrNoNodePost) {
		t.Fatalf("got %v, want ErrNoNodePost", err)
	}
	if !strings.Contains(err.Error(), "v0.0.38(GET)") {
		t.Errorf("error does not say what was offered: %v", err)
	}
	// Discovery is remembered: a second ask sends nothing.
	r.writeVersion(t.Context())
	if n := f.count("GET", "/openapi/v3"); n != 1 {
		t.Errorf("openapi fetched %d times, want 1", n)
	}
}
