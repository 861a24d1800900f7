package slurm

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cachedREST is a client on url that keeps its API version in path, on a
// clock fixed at now.
func cachedREST(t *testing.T, url, path string, readOnly bool, now time.Time) *REST {
	t.Helper()
	opts := append(testOpts(&noSleep{}), WithVersionCache(path, readOnly), withVersionClock(func() time.Time { return now }))
	return newTestREST(t, url, opts...)
}

// fake2605 serves 26.05's recorded discovery and gpu001 on v0.0.45; every
// other version's path is answered as 26.05 answers a version it does not
// serve (recorded: unserved_version.404.json).
func fake2605(t *testing.T) *fakeSlurmrestd {
	f := newFake()
	openapiRoute(t, f, "slurm-26.05")
	f.on("GET", "/slurm/v0.0.45/node/gpu001", reply{200, restFixture(t, "slurm-26.05", "v0.0.45/node_idle.200.json")})
	f.on("GET", "/slurm/v0.0.41/node/gpu001", reply{404, restFixture(t, "slurm-26.05", "unserved_version.404.json")})
	return f
}

func writeCache(t *testing.T, path string, rec versionRecord, mode os.FileMode) {
	t.Helper()
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func TestVersionCacheSparesTheNextRunADiscovery(t *testing.T) {
	f := fake2605(t)
	url := serve(t, f)
	path := filepath.Join(t.TempDir(), "slurmrestd-api.json")
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	if _, err := cachedREST(t, url, path, false, now).Node(t.Context(), "gpu001"); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("cache file: %v, %v (want mode 0600)", fi, err)
	}
	// The next run, 59 minutes on: no discovery.
	r := cachedREST(t, url, path, false, now.Add(59*time.Minute))
	if _, err := r.Node(t.Context(), "gpu001"); err != nil {
		t.Fatal(err)
	}
	if n := f.count("GET", "/openapi/v3"); n != 1 {
		t.Errorf("openapi fetched %d times over two runs, want 1", n)
	}
	if got := r.Backend(); got != "rest v0.0.45" {
		t.Errorf("backend %q from the cache, want rest v0.0.45", got)
	}
}

// What an upgrade does: the cached version is no longer served.
func TestVersionCacheDroppedOnA404(t *testing.T) {
	f := fake2605(t)
	path := filepath.Join(t.TempDir(), "slurmrestd-api.json")
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	url := serve(t, f)
	writeCache(t, path, versionRecord{URL: url, Read: "v0.0.41", Write: "v0.0.41", At: now.Add(-time.Minute)}, 0o600)
	n, err := cachedREST(t, url, path, false, now).Node(t.Context(), "gpu001")
	if err != nil || n.Name != "gpu001" {
		t.Fatalf("node %+v, %v; want gpu001 read on the rediscovered version", n, err)
	}
	if c := f.count("GET", "/slurm/v0.0.41/node/gpu001"); c != 1 {
		t.Errorf("stale version asked %d times, want 1", c)
	}
	if c := f.count("GET", "/openapi/v3"); c != 1 {
		t.Errorf("openapi fetched %d times, want 1", c)
	}
	got, ok := versionCache{path: path, now: func() time.Time { return now }}.load(url)
	if !ok || got.read != "v0.0.45" {
		t.Errorf("cache after the 404: %+v %v, want v0.0.45", got, ok)
	}
}

// A 404 on a version just discovered is slurmrestd's answer, not a stale
// cache: no second discovery, no loop.
func TestVersionCache404OnAFreshVersionIsTheAnswer(t *testing.T) {
	f := newFake()
	openapiRoute(t, f, "slurm-26.05")
	f.on("GET", "/slurm/v0.0.45/node/gpu001", reply{404, restFixture(t, "slurm-26.05", "unserved_version.404.json")})
	path := filepath.Join(t.TempDir(), "slurmrestd-api.json")
	url := serve(t, f)
	writeCache(t, path, versionRecord{URL: url, Read: "v0.0.45", Write: "v0.0.45", At: time.Now()}, 0o600)
	_, err := cachedREST(t, url, path, false, time.Now()).Node(t.Context(), "gpu001")
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 404 {
		t.Fatalf("got %v, want the 404", err)
	}
	// The cached v0.0.45 got the 404 and discovery says v0.0.45 again:
	// asking once more would only repeat the answer.
	if c := f.count("GET", "/slurm/v0.0.45/node/gpu001"); c != 1 {
		t.Errorf("node asked %d times, want 1 (rediscovery found the same version)", c)
	}
	if c := f.count("GET", "/openapi/v3"); c != 1 {
		t.Errorf("openapi fetched %d times, want 1", c)
	}
}

// Anything but a fresh, sound record of this URL is a miss.
func TestVersionCacheMisses(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	good := func(url string) versionRecord {
		return versionRecord{URL: url, Read: "v0.0.45", Write: "v0.0.45", At: now.Add(-time.Minute)}
	}
	cases := []struct {
		name  string
		write func(t *testing.T, path, url string)
	}{
		{"another URL", func(t *testing.T, p, url string) {
			r := good(url)
			r.URL = "http://other:6820"
			writeCache(t, p, r, 0o600)
		}},
		{"older than the TTL", func(t *testing.T, p, url string) {
			r := good(url)
			r.At = now.Add(-versionCacheTTL - time.Second)
			writeCache(t, p, r, 0o600)
		}},
		{"from the future", func(t *testing.T, p, url string) {
			r := good(url)
			r.At = now.Add(time.Hour)
			writeCache(t, p, r, 0o600)
		}},
		{"not a version", func(t *testing.T, p, url string) {
			r := good(url)
			r.Read = "../../etc"
			writeCache(t, p, r, 0o600)
		}},
		{"no time", func(t *testing.T, p, url string) {
			r := good(url)
			r.At = time.Time{}
			writeCache(t, p, r, 0o600)
		}},
		{"group-writable", func(t *testing.T, p, url string) { writeCache(t, p, good(url), 0o620) }},
		{"garbage", func(t *testing.T, p, url string) { os.WriteFile(p, []byte("{not json"), 0o600) }},
		{"oversized", func(t *testing.T, p, url string) {
			os.WriteFile(p, []byte(strings.Repeat(" ", maxVersionCache+1)+"{}"), 0o600)
		}},
		{"a directory", func(t *testing.T, p, url string) { os.Mkdir(p, 0o700) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := fake2605(t)
			url := serve(t, f)
			path := filepath.Join(t.TempDir(), "slurmrestd-api.json")
			tc.write(t, path, url)
			if _, err := cachedREST(t, url, path, false, now).Node(t.Context(), "gpu001"); err != nil {
				t.Fatal(err)
			}
			if c := f.count("GET", "/openapi/v3"); c != 1 {
				t.Errorf("openapi fetched %d times, want 1: the record must not be used", c)
			}
		})
	}
}

// A dry run reads the cache but leaves the state directory as it was.
func TestVersionCacheReadOnly(t *testing.T) {
	f := fake2605(t)
	url := serve(t, f)
	path := filepath.Join(t.TempDir(), "slurmrestd-api.json")
	if _, err := cachedREST(t, url, path, true, time.Now()).Node(t.Context(), "gpu001"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a dry run wrote the cache: %v", err)
	}
	writeCache(t, path, versionRecord{URL: url, Read: "v0.0.45", Write: "v0.0.45", At: time.Now()}, 0o600)
	if _, err := cachedREST(t, url, path, true, time.Now()).Node(t.Context(), "gpu001"); err != nil {
		t.Fatal(err)
	}
	if c := f.count("GET", "/openapi/v3"); c != 1 {
		t.Errorf("openapi fetched %d times, want 1 (the second dry run reads the cache)", c)
	}
}
