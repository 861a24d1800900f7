package slurm

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/gpuhc/gpuhc/internal/atomicfile"
	"github.com/gpuhc/gpuhc/internal/lazyre"
	"github.com/gpuhc/gpuhc/internal/sysread"
)

// versionCacheTTL is how long a discovered API version is trusted. Every
// run that talks to Slurm would otherwise fetch /openapi/v3 (887 KB from
// 26.05.5, recorded), and in a storm every failing node does so each
// interval. An upgrade that drops the cached version is caught sooner, by
// the 404 it causes (see REST.versioned); an upgrade that adds a newer one
// only waits for the TTL, as the older version still works.
const versionCacheTTL = time.Hour

// maxVersionCache caps the cache file: a few hundred bytes when sound.
const maxVersionCache = 4 << 10

var versionRE = lazyre.New(`^v0\.0\.\d{1,3}$`)

// VersionCacheFile is where a node's runs keep the API version.
func VersionCacheFile(stateDir string) string {
	return filepath.Join(stateDir, "slurmrestd-api.json")
}

// versionCache keeps discovery's answer in the state directory, one file
// per node. The zero value caches nothing.
type versionCache struct {
	path     string
	readOnly bool // a dry run reads the cache but never writes it
	now      func() time.Time
}

type versionRecord struct {
	URL   string    `json:"url"`
	Read  string    `json:"read"`
	Write string    `json:"write"`
	Seen  string    `json:"seen"`
	At    time.Time `json:"at"`
}

// load is the cached answer for base, if there is a fresh, sound one.
// Anything else (no file, another URL, stale, garbage) is a miss: the
// cache can only save a request, never decide an outcome.
func (c versionCache) load(base string) (apiVersions, bool) {
	if c.path == "" {
		return apiVersions{}, false
	}
	if fi, err := os.Lstat(c.path); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o022 != 0 {
		return apiVersions{}, false // absent, or a file others could have written
	}
	b, err := sysread.File(c.path, maxVersionCache)
	if err != nil {
		return apiVersions{}, false
	}
	var rec versionRecord
	if json.Unmarshal(b, &rec) != nil || rec.URL != base || !rec.sound() {
		return apiVersions{}, false
	}
	age := c.now().Sub(rec.At)
	if age < -time.Minute || age > versionCacheTTL {
		return apiVersions{}, false
	}
	return apiVersions{read: rec.Read, write: rec.Write, seen: sysread.Printable(rec.Seen)}, true
}

func (r versionRecord) sound() bool {
	return versionRE.MatchString(r.Read) && (r.Write == "" || versionRE.MatchString(r.Write)) && !r.At.IsZero()
}

// save records a fresh discovery. A cache that cannot be written only
// costs the next run a discovery, so the error is for the log.
func (c versionCache) save(base string, v apiVersions) error {
	if c.path == "" || c.readOnly {
		return nil
	}
	b, err := json.Marshal(versionRecord{URL: base, Read: v.read, Write: v.write, Seen: v.seen, At: c.now().UTC()})
	if err != nil {
		return fmt.Errorf("encode API version cache: %w", err)
	}
	return atomicfile.Write(c.path, append(b, '\n'), atomicfile.Options{Mode: 0o600, DirMode: 0o700, Pattern: ".slurmrestd-api.*"})
}

// drop forgets the cached answer once it has been proved wrong.
func (c versionCache) drop() error {
	if c.path == "" || c.readOnly {
		return nil
	}
	if err := os.Remove(c.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("drop API version cache: %w", err)
	}
	return nil
}
