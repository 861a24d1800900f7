package jobrecord

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/gpu"
	"github.com/gpuhc/gpuhc/internal/gpu/sim"
	"github.com/gpuhc/gpuhc/internal/kmsg"
)

func u64(v uint64) *uint64 { return &v }
func i(v int) *int         { return &v }
func b(v bool) *bool       { return &v }

func TestStore(t *testing.T) {
	s := Store{Dir: filepath.Join(t.TempDir(), "jobs"), Max: 3}
	rec := Record{JobID: "42", UID: 1001, User: "bob", Start: time.Unix(1700000000, 0).UTC(), BootID: "b1", KmsgNext: 17, KmsgOK: true,
		GPUs: []Counters{{PCI: "0000:18:00.0", Index: 0, DBE: u64(0), RemapPending: b(false)}}}
	if err := s.Save(rec); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load("42")
	if err != nil || !reflect.DeepEqual(got, rec) {
		t.Fatalf("load: %+v %v", got, err)
	}
	if err := s.Remove("42"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load("42"); !errors.Is(err, ErrNoRecord) {
		t.Errorf("after remove: %v", err)
	}
	if err := s.Remove("42"); err != nil {
		t.Errorf("removing twice: %v", err)
	}
}

func TestStoreRefusesWhatIsNotAJobID(t *testing.T) {
	s := Store{Dir: t.TempDir(), Max: 3}
	for _, id := range []string{"", "../../etc/passwd", "42/../1", "0", "007", "1e3"} {
		if err := s.Save(Record{JobID: id}); err == nil {
			t.Errorf("saved job %q", id)
		}
		if _, err := s.Load(id); err == nil || errors.Is(err, ErrNoRecord) {
			t.Errorf("load %q: %v", id, err)
		}
	}
}

func TestStoreBadFiles(t *testing.T) {
	s := Store{Dir: t.TempDir(), Max: 3}
	write := func(id, data string) {
		if err := os.WriteFile(filepath.Join(s.Dir, "job."+id+".json"), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("1", "{not json")
	write("2", `{"job_id":"3"}`)
	write("3", strings.Repeat(" ", maxRecord+1))
	for id, want := range map[string]string{"1": "corrupt", "2": `is for job "3"`, "3": "larger than"} {
		if _, err := s.Load(id); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("job %s: %v, want %q", id, err, want)
		}
	}
}

// Records whose epilog never ran are removed, oldest first, beyond Max.
func TestStoreIsBounded(t *testing.T) {
	s := Store{Dir: t.TempDir(), Max: 3}
	// A file that is not a record is never touched.
	other := filepath.Join(s.Dir, "notes.txt")
	if err := os.WriteFile(other, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := time.Now().Add(-time.Hour)
	for n := 1; n <= 5; n++ {
		id := fmt.Sprint(n)
		if err := s.Save(Record{JobID: id}); err != nil {
			t.Fatal(err)
		}
		// Distinct ages, whatever the file system's time resolution.
		at := base.Add(time.Duration(n) * time.Minute)
		if err := os.Chtimes(filepath.Join(s.Dir, "job."+id+".json"), at, at); err != nil {
			t.Fatal(err)
		}
	}
	var left []string
	for n := 1; n <= 5; n++ {
		if _, err := s.Load(fmt.Sprint(n)); err == nil {
			left = append(left, fmt.Sprint(n))
		}
	}
	if strings.Join(left, ",") != "3,4,5" {
		t.Errorf("records left %v, want the newest 3", left)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("pruning removed another file: %v", err)
	}
}

func TestDiff(t *testing.T) {
	before := []Counters{
		{PCI: "0000:18:00.0", Index: 0, DBE: u64(0), Corrected: u64(5), SRAM: u64(0), RemapCorr: i(0), RemapUnc: i(0), RemapPending: b(false), RemapFailed: b(false)},
		{PCI: "0000:2a:00.0", Index: 1, DBE: u64(3), Corrected: u64(9)},
		{PCI: "0000:3a:00.0", Index: 2, DBE: nil},
		{PCI: "0000:5d:00.0", Index: 3, Serial: "SN3"},
	}
	tests := []struct {
		name  string
		after []Counters
		want  []string // "index:severe:message"
	}{
		{name: "nothing changed", after: before},
		{
			name: "every counter grew on gpu0",
			after: []Counters{
				{PCI: "0000:18:00.0", Index: 0, DBE: u64(2), Corrected: u64(6), SRAM: u64(1), RemapCorr: i(1), RemapUnc: i(1), RemapPending: b(true), RemapFailed: b(true)},
				before[1], before[2], before[3],
			},
			want: []string{"0:true:volatile DBE 0 -> 2", "0:true:SRAM uncorrectable 0 -> 1", "0:false:volatile corrected ECC 5 -> 6",
				"0:true:uncorrectable remapped rows 0 -> 1", "0:false:correctable remapped rows 0 -> 1", "0:true:row remap pending", "0:true:row remap failed"},
		},
		{
			name:  "a counter reset (GPU reset) is not an error",
			after: []Counters{before[0], {PCI: "0000:2a:00.0", Index: 1, DBE: u64(0), Corrected: u64(0)}, before[2], before[3]},
		},
		{
			name:  "a counter unknown before or after is not compared",
			after: []Counters{before[0], {PCI: "0000:2a:00.0", Index: 1}, {PCI: "0000:3a:00.0", Index: 2, DBE: u64(9)}, before[3]},
		},
		{
			name:  "a GPU gone from NVML, indices shifted",
			after: []Counters{before[0], before[1], {PCI: "0000:5d:00.0", Index: 2, Serial: "SN3", DBE: u64(1)}},
			want:  []string{"2:true:GPU no longer listed by NVML"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, c := range Diff(before, tt.after) {
				got = append(got, fmt.Sprintf("%d:%v:%s", c.Index, c.Severe, c.Message))
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

// The prolog's position and counters on a simulated node, then the
// epilog's view after faults "during the job".
func TestAttributionOnASimulatedNode(t *testing.T) {
	ctx := context.Background()
	start, err := sim.New("dgxh100", nil)
	if err != nil {
		t.Fatal(err)
	}
	startSrc := kmsg.SimulatedSource(start.Kmsg, start.BootID, start.KmsgWatchedFrom())
	next, err := Position(ctx, startSrc)
	if err != nil || next != uint64(len(start.Kmsg)) {
		t.Fatalf("position %d, %v; want %d", next, err, len(start.Kmsg))
	}
	before, err := Snapshot(ctx, gpu.NewNode(start.Server, "/", -1, "dgxh100"))
	if err != nil || len(before) != 8 || before[3].DBE == nil || *before[3].DBE != 0 {
		t.Fatalf("snapshot %+v %v", before, err)
	}
	rec := Record{JobID: "7", BootID: start.BootID, KmsgNext: next, KmsgOK: true, GPUs: before}

	end, err := sim.Build("dgxh100", []string{"gpu3:xid=79", "gpu3:dbe=2", "gpu5:xid=13"})
	if err != nil {
		t.Fatal(err)
	}
	src := kmsg.SimulatedSource(end.Kmsg, end.BootID, end.KmsgWatchedFrom())
	evs, note, err := XIDs(ctx, src, rec)
	if err != nil || note != "" || len(evs) != 2 || evs[0].XID != 79 || evs[0].PCI != "0000:5d:00.0" || evs[1].XID != 13 {
		t.Fatalf("XIDs %+v %q %v", evs, note, err)
	}
	after, err := Snapshot(ctx, gpu.NewNode(end.Server, "/", -1, "dgxh100"))
	if err != nil {
		t.Fatal(err)
	}
	ch := Diff(rec.GPUs, after)
	if len(ch) != 1 || ch[0].Index != 3 || ch[0].Message != "volatile DBE 0 -> 2" || !ch[0].Severe {
		t.Errorf("changes %+v", ch)
	}

	// An XID already in the log when the job started is not the job's.
	rec.KmsgNext, _ = Position(ctx, src)
	if evs, _, _ := XIDs(ctx, src, rec); len(evs) != 0 {
		t.Errorf("XIDs from before the job: %+v", evs)
	}
	// A reboot during the job: the whole new log is the job's.
	rec.BootID = "another-boot"
	if evs, note, _ := XIDs(ctx, src, rec); len(evs) != 2 || !strings.Contains(note, "rebooted") {
		t.Errorf("after a reboot: %+v %q", evs, note)
	}
	// No boot id to tell, but the log is shorter than the position.
	rec.BootID, rec.KmsgNext = "", 1000
	noBoot := kmsg.SliceSource(end.Kmsg, "")
	if evs, note, _ := XIDs(ctx, noBoot, rec); len(evs) != 2 || !strings.Contains(note, "restarted") {
		t.Errorf("restarted log: %+v %q", evs, note)
	}
	// The prolog could not read the log.
	if evs, note, err := XIDs(ctx, src, Record{JobID: "7"}); len(evs) != 0 || err != nil || !strings.Contains(note, "could not read") {
		t.Errorf("no position: %+v %q %v", evs, note, err)
	}
}
