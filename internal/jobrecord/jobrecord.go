// Package jobrecord keeps what gpuhc-prolog saw as a job started, for the
// job's epilog to tell what happened to the hardware during the job: the
// kernel log's position (so every XID logged since is the job's) and each
// GPU's memory error counters (so every error counted since is too).
//
// Attribution does not depend on the health check: its XID cursor may
// have consumed the job's XIDs long before the epilog runs, but the
// kernel keeps its log whoever reads it, and the epilog reads it again
// from the job's own position.
//
// One small file per job, state_dir/jobs/job.<id>.json (under
// state_dir/simulated/ for a --simulate run); the epilog removes it, and
// the prolog removes the oldest beyond a bound, so jobs whose epilog never
// ran (a node that crashed) leave nothing to pile up.
package jobrecord

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpuhc/gpuhc/internal/atomicfile"
	"github.com/gpuhc/gpuhc/internal/sysread"
)

// Record is what the prolog saw as a job started.
type Record struct {
	JobID string    `json:"job_id"`
	UID   int       `json:"uid"`
	User  string    `json:"user,omitempty"`
	Start time.Time `json:"start"`
	// BootID is the kernel's boot id: sequence numbers restart each boot.
	BootID string `json:"boot_id"`
	// KmsgNext is the sequence number of the first kernel log record
	// after the job's start; valid only when KmsgOK (the log could be
	// read to its end).
	KmsgNext uint64 `json:"kmsg_next"`
	KmsgOK   bool   `json:"kmsg_ok"`
	// GPUs are the memory error counters of each GPU NVML listed.
	GPUs []Counters `json:"gpus,omitempty"`
}

// Counters are one GPU's memory error counters; nil where NVML did not
// answer (ECC off, not supported, an error).
type Counters struct {
	PCI    string `json:"pci"`
	Index  int    `json:"index"`
	UUID   string `json:"uuid,omitempty"`
	Serial string `json:"serial,omitempty"`
	// DBE is the volatile uncorrected count in device memory, Corrected
	// the volatile corrected one, SRAM the volatile uncorrected SRAM one.
	DBE       *uint64 `json:"dbe,omitempty"`
	Corrected *uint64 `json:"corrected,omitempty"`
	SRAM      *uint64 `json:"sram,omitempty"`
	// Remapped rows (Ampere and later).
	RemapCorr    *int  `json:"remap_corr,omitempty"`
	RemapUnc     *int  `json:"remap_unc,omitempty"`
	RemapPending *bool `json:"remap_pending,omitempty"`
	RemapFailed  *bool `json:"remap_failed,omitempty"`
}

// Store is the directory of job records.
type Store struct {
	Dir string
	// Max bounds the number of records ([prolog] max_job_records).
	Max int
}

// Dir is the records' directory under a state directory.
func Dir(stateDir string) string { return filepath.Join(stateDir, "jobs") }

// maxRecord caps a record read: a real one is a few KiB.
const maxRecord = 1 << 20

// ErrNoRecord: the job has no record (its prolog did not run, ran before
// gpuhc was installed, or was a dry run).
var ErrNoRecord = errors.New("no job record")

func (s Store) path(jobID string) (string, error) {
	n, err := strconv.ParseUint(jobID, 10, 64)
	if err != nil || n == 0 || strconv.FormatUint(n, 10) != jobID {
		// Never build a path from anything else.
		return "", fmt.Errorf("job id %q is not a number", jobID)
	}
	return filepath.Join(s.Dir, "job."+jobID+".json"), nil
}

// Save writes the record atomically, then removes the oldest records
// beyond Max.
func (s Store) Save(r Record) error {
	p, err := s.path(r.JobID)
	if err != nil {
		return err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode job record: %w", err)
	}
	if err := atomicfile.Write(p, append(b, '\n'), atomicfile.State(".job-*.json")); err != nil {
		return err
	}
	return s.prune()
}

// Load reads a job's record; ErrNoRecord if there is none.
func (s Store) Load(jobID string) (Record, error) {
	p, err := s.path(jobID)
	if err != nil {
		return Record{}, err
	}
	f, err := sysread.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return Record{}, ErrNoRecord
	}
	if err != nil {
		return Record{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxRecord+1))
	if err != nil {
		return Record{}, fmt.Errorf("read %s: %w", p, err)
	}
	if len(b) > maxRecord {
		return Record{}, fmt.Errorf("read %s: larger than %d bytes", p, maxRecord)
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return Record{}, fmt.Errorf("corrupt job record %s: %w", p, err)
	}
	if r.JobID != jobID {
		return Record{}, fmt.Errorf("job record %s is for job %q", p, r.JobID)
	}
	return r, nil
}

// Remove deletes a job's record; a missing one is fine.
func (s Store) Remove(jobID string) error {
	p, err := s.path(jobID)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", p, err)
	}
	return nil
}

// maxListed caps the directory listing: a directory grown past any
// sane bound (a bug, a hand-made mess) must not cost a job start minutes.
const maxListed = 100_000

// prune removes the oldest records beyond Max. Several prologs may prune
// at once; a record another removed first is simply gone.
func (s Store) prune() error {
	if s.Max <= 0 {
		return nil
	}
	d, err := os.Open(s.Dir)
	if err != nil {
		return fmt.Errorf("list %s: %w", s.Dir, err)
	}
	defer d.Close()
	entries, err := d.ReadDir(maxListed)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("list %s: %w", s.Dir, err)
	}
	type rec struct {
		name string
		mod  time.Time
	}
	var recs []rec
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasPrefix(name, "job.") || !strings.HasSuffix(name, ".json") {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		recs = append(recs, rec{name, info.ModTime()})
	}
	if len(recs) <= s.Max {
		return nil
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].mod.Before(recs[j].mod) })
	var errs []error
	for _, r := range recs[:len(recs)-s.Max] {
		if err := os.Remove(filepath.Join(s.Dir, r.name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
