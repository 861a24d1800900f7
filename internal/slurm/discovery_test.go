package slurm

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestPickVersionsRecorded(t *testing.T) {
	cases := []struct {
		release, newest string
		offered         []string
	}{
		{"slurm-24.11", "v0.0.42", []string{"v0.0.40(DELETE,GET,POST)", "v0.0.41(DELETE,GET,POST)", "v0.0.42(DELETE,GET,POST)"}},
		{"slurm-26.05", "v0.0.45", []string{"v0.0.42(DELETE,GET,POST)", "v0.0.43(DELETE,GET,POST)", "v0.0.44(DELETE,GET,POST)", "v0.0.45(DELETE,GET,POST)"}},
	}
	for _, c := range cases {
		// /openapi/v3 answers a corrupted token with the same document
		// (recorded), which is why credentials are checked elsewhere.
		for _, file := range []string{"openapi.200.json", "openapi_badtoken.200.json"} {
			v, err := pickVersions(restFixture(t, c.release, file))
			if err != nil {
				t.Fatal(err)
			}
			if v.write != c.newest || v.read != c.newest {
				t.Errorf("%s/%s: read %q write %q, want %s for both", c.release, file, v.read, v.write, c.newest)
			}
			if got := strings.Fields(v.seen); !slices.Equal(got, c.offered) {
				t.Errorf("%s/%s: offered %q, want %q", c.release, file, got, c.offered)
			}
		}
	}

	v, err := pickVersions(restFixture(t, "slurm-22.05", "openapi.200.json"))
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

// Without token headers slurmrestd refuses even /openapi/v3: HTTP 401,
// plain text (recorded on every release).
func TestDiscoveryWithoutAuthRecorded(t *testing.T) {
	for _, release := range []string{"slurm-22.05", "slurm-24.11", "slurm-26.05"} {
		f := newFake()
		f.on("GET", "/openapi/v3", reply{401, restFixture(t, release, "openapi_noauth.401.json")})
		r := newTestREST(t, serve(t, f))
		_, err := r.Node(t.Context(), "gpu001")
		if !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "discover API version") ||
			!strings.Contains(err.Error(), "HTTP 401: Authentication failure") {
			t.Errorf("%s: %v", release, err)
		}
		if n := f.count("GET", "/openapi/v3"); n != 1 {
			t.Errorf("%s: asked %d times; a refusal is not retried", release, n)
		}
	}
}
