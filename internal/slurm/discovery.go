package slurm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/gpuhc/gpuhc/internal/lazyre"
)

// minNodePost is the first API version with node POST (Slurm 23.02).
const minNodePost = 39

// nodePathRE takes N as slurmrestd writes it, without leading zeros and
// of at most 3 digits (versionRE): the version picked is then one the
// document serves under that very name, and one the cache keeps.
var nodePathRE = lazyre.New(`^/slurm/v0\.0\.(0|[1-9][0-9]{0,2})/node/\{[A-Za-z_]+\}$`)

// apiVersions is what discovery learnt: the newest version that can read a
// node and the newest that can change one ("" when none: Slurm 22.05).
type apiVersions struct {
	read, write string
	// seen lists every node path version and its methods, for errors.
	seen string
}

// openAPI is the part of /openapi/v3 discovery reads.
type openAPI struct {
	Paths map[string]map[string]json.RawMessage `json:"paths"`
}

// discover is the API versions to use: those this client already knows,
// else the cached ones, else what /openapi/v3 says.
func (r *REST) discover(ctx context.Context) (apiVersions, error) {
	r.mu.Lock()
	v := r.versions
	r.mu.Unlock()
	if v != nil {
		return *v, nil
	}
	if got, ok := r.cache.load(r.ep.base); ok {
		r.remember(got, true)
		return got, nil
	}
	return r.fetchVersions(ctx)
}

// fetchVersions asks slurmrestd and caches the answer.
func (r *REST) fetchVersions(ctx context.Context) (apiVersions, error) {
	resp, err := r.do(ctx, request{method: "GET", path: "/openapi/v3"})
	if err != nil {
		return apiVersions{}, fmt.Errorf("discover API version: %w", err)
	}
	got, err := pickVersions(resp.body)
	if err != nil {
		return apiVersions{}, err
	}
	r.remember(got, false)
	if err := r.cache.save(r.ep.base, got); err != nil {
		r.log.WithError(err).Warn("slurmrestd API version not cached; the next run discovers it again")
	}
	return got, nil
}

func (r *REST) remember(v apiVersions, cached bool) {
	r.mu.Lock()
	r.versions, r.cached = &v, cached
	r.mu.Unlock()
}

// versioned runs call on the API versions. A cached version that
// slurmrestd answers with HTTP 404 may have gone with an upgrade: the
// cache is dropped, and where a fresh discovery picks another version the
// call is made once more on it. A 404 on the version just discovered is
// the answer.
func (r *REST) versioned(ctx context.Context, call func(apiVersions) error) error {
	v, err := r.discover(ctx)
	if err != nil {
		return err
	}
	err = call(v)
	if !r.stale(err) {
		return err
	}
	if derr := r.cache.drop(); derr != nil {
		r.log.WithError(derr).Warn("stale slurmrestd API version cache not removed")
	}
	fresh, ferr := r.fetchVersions(ctx)
	if ferr != nil || (fresh.read == v.read && fresh.write == v.write) {
		return err
	}
	return call(fresh)
}

// stale: err is a 404 for a request made on a cached version.
func (r *REST) stale(err error) bool {
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusNotFound {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cached
}

// writeVersion is the version for node POST, or ErrNoNodePost.
func (r *REST) writeVersion(ctx context.Context) (string, error) {
	v, err := r.discover(ctx)
	if err != nil {
		return "", err
	}
	return postVersion(v)
}

func postVersion(v apiVersions) (string, error) {
	if v.write == "" {
		return "", fmt.Errorf("%w; node paths offered: %s", ErrNoNodePost, v.seen)
	}
	return v.write, nil
}

// pickVersions reads an OpenAPI document: the highest N with a GET on
// /slurm/v0.0.N/node/{node_name} reads, the highest N ≥ 39 with a POST writes.
func pickVersions(doc []byte) (apiVersions, error) {
	var spec openAPI
	if err := json.Unmarshal(doc, &spec); err != nil {
		return apiVersions{}, fmt.Errorf("decode /openapi/v3: %w", err)
	}
	read, write := -1, -1
	var seen []string
	for path, ops := range spec.Paths {
		m := nodePathRE.FindStringSubmatch(path)
		if m == nil {
			continue
		}
		n, err := strconv.Atoi(m[1])
		if err != nil {
			continue
		}
		seen = append(seen, fmt.Sprintf("v0.0.%d(%s)", n, methods(ops)))
		if _, ok := ops["get"]; ok && n > read {
			read = n
		}
		if _, ok := ops["post"]; ok && n >= minNodePost && n > write {
			write = n
		}
	}
	if read < 0 {
		return apiVersions{}, fmt.Errorf("/openapi/v3 has no /slurm/v0.0.N/node/{node_name} path")
	}
	sort.Strings(seen)
	return apiVersions{read: version(read), write: version(write), seen: strings.Join(seen, " ")}, nil
}

func version(n int) string {
	if n < 0 {
		return ""
	}
	return fmt.Sprintf("v0.0.%d", n)
}

func methods(ops map[string]json.RawMessage) string {
	var ms []string
	for m := range ops {
		switch m {
		case "get", "post", "put", "delete", "patch":
			ms = append(ms, strings.ToUpper(m))
		}
	}
	sort.Strings(ms)
	return strings.Join(ms, ",")
}
