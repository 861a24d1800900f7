package events

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func ev(node string, sec int) Event {
	return Event{Time: time.Unix(int64(sec), 0).UTC(), Kind: KindTransition, Node: node, Check: "host.mounts", Component: "/scratch", Status: "FAIL", Previous: "OK", Message: fmt.Sprintf("m%d", sec), BootID: "b"}
}

func lines(evs ...Event) []byte {
	var b []byte
	for _, e := range evs {
		j, err := json.Marshal(e)
		if err != nil {
			panic(err)
		}
		b = append(append(b, j...), '\n')
	}
	return b
}

func gz(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

type result struct {
	evs   []Event
	warns []string
	tot   Totals
}

func scan(t *testing.T, sources []string, stdin []byte) (result, error) {
	t.Helper()
	var r result
	var in *bytes.Reader
	if stdin != nil {
		in = bytes.NewReader(stdin)
	}
	var err error
	r.tot, err = ScanTotals(context.Background(), sources, in, func(w string) { r.warns = append(r.warns, w) }, func(e Event) error {
		r.evs = append(r.evs, e)
		return nil
	})
	return r, err
}

func messages(evs []Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Node+"/"+e.Message)
	}
	return out
}

func TestScanDirectoryRotatedAndGzip(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.events.jsonl"), lines(ev("a", 5), ev("a", 6)))
	write(t, filepath.Join(dir, "a.events.jsonl.1"), lines(ev("a", 3), ev("a", 4)))
	write(t, filepath.Join(dir, "a.events.jsonl.2.gz"), gz(lines(ev("a", 1), ev("a", 2))))
	// gzip found by its magic bytes, not the name ...
	write(t, filepath.Join(dir, "b.events.jsonl.3"), gz(lines(ev("b", 1))))
	// ... and a .gz name over plain text is read as text.
	write(t, filepath.Join(dir, "b.events.jsonl.4.gz"), lines(ev("b", 2)))
	write(t, filepath.Join(dir, ".b.events.jsonl.tmp"), lines(ev("hidden", 1)))
	write(t, filepath.Join(dir, "sub", "c.events.jsonl"), lines(ev("c", 1)))
	r, err := scan(t, []string{dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a/m5", "a/m6", "a/m3", "a/m4", "a/m1", "a/m2", "b/m1", "b/m2"}
	if got := messages(r.evs); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v (sorted file names, line order)", got, want)
	}
	if len(r.warns) != 0 {
		t.Fatalf("warnings: %q", r.warns)
	}
	if r.tot.Files != 5 || r.tot.Lines != 8 || r.tot.Events != 8 {
		t.Fatalf("totals %+v", r.tot)
	}
	if !reflect.DeepEqual(r.evs[0], ev("a", 5)) {
		t.Fatalf("decoded %+v, want %+v", r.evs[0], ev("a", 5))
	}
}

func TestScanGlobStdinAndDuplicates(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "n1", "events.jsonl"), lines(ev("n1", 1)))
	write(t, filepath.Join(dir, "n2", "events.jsonl"), lines(ev("n2", 1)))
	if err := os.Symlink(filepath.Join(dir, "n1", "events.jsonl"), filepath.Join(dir, "link.jsonl")); err != nil {
		t.Fatal(err)
	}
	// A glob matching directories reads them; the same file through a
	// second source or a symlink is read once; "-" is stdin, once.
	r, err := scan(t, []string{filepath.Join(dir, "n*"), "-", filepath.Join(dir, "n1", "events.jsonl"), filepath.Join(dir, "link.jsonl"), "-"}, lines(ev("in", 7)))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := messages(r.evs), []string{"n1/m1", "n2/m1", "in/m7"}; !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	if _, err := scan(t, []string{filepath.Join(dir, "nothing*")}, nil); err == nil || !strings.Contains(err.Error(), "no file matches") {
		t.Fatalf("empty glob: %v", err)
	}
	if _, err := scan(t, []string{filepath.Join(dir, "missing.jsonl")}, nil); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestScanTornAndMalformedLines(t *testing.T) {
	dir := t.TempDir()
	full := lines(ev("a", 1), ev("a", 2))
	torn := lines(ev("a", 3))
	// A torn fragment in the middle (Append ends it with a newline before
	// the next batch), a junk line, an event without node, and a torn last
	// line without newline.
	body := append([]byte{}, full...)
	body = append(body, torn[:20]...)
	body = append(body, '\n')
	body = append(body, "not json\n\n"...)
	body = append(body, `{"time":"2024-01-01T00:00:00Z","kind":"heartbeat"}`+"\n"...)
	body = append(body, lines(ev("a", 4))...)
	body = append(body, torn[:30]...)
	write(t, filepath.Join(dir, "events.jsonl"), body)
	// A torn last line that does end in a newline (and blank lines) is
	// also "torn".
	write(t, filepath.Join(dir, "events.jsonl.1"), append(lines(ev("a", 0)), "{\"time\":\n \n"...))
	r, err := scan(t, []string{dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := messages(r.evs), []string{"a/m1", "a/m2", "a/m4", "a/m0"}; !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	f, f1 := filepath.Join(dir, "events.jsonl"), filepath.Join(dir, "events.jsonl.1")
	want := []string{
		f + ":3: skipped malformed line: unexpected end of JSON input",
		f + ":4: skipped malformed line: invalid character 'o' in literal null (expecting 'u')",
		f + ":6: skipped event without node",
		f + ":8: skipped torn last line",
		f1 + ":2: skipped torn last line",
	}
	if !slices.Equal(r.warns, want) {
		t.Fatalf("warnings\n%s\nwant\n%s", strings.Join(r.warns, "\n"), strings.Join(want, "\n"))
	}
	if r.tot != (Totals{Files: 2, Bytes: r.tot.Bytes, Lines: 11, Events: 4, Malformed: 4, Torn: 2, Invalid: 1}) {
		t.Fatalf("totals %+v", r.tot)
	}
}

func TestScanWarningsCappedPerFile(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "junk"), bytes.Repeat([]byte("junk\n"), 25))
	r, err := scan(t, []string{dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.warns) != warnPerFile+2 || !strings.HasSuffix(r.warns[warnPerFile], "junk:25: skipped torn last line") ||
		!strings.HasSuffix(r.warns[warnPerFile+1], "junk: 14 more bad lines skipped without a warning each") {
		t.Fatalf("warnings %q", r.warns)
	}
	if r.tot.Malformed != 25 || r.tot.Torn != 1 {
		t.Fatalf("totals %+v", r.tot)
	}
}

func TestScanTruncatedGzipKeepsWhatWasRead(t *testing.T) {
	dir := t.TempDir()
	var body []byte
	for i := range 2000 {
		body = append(body, lines(ev("a", i))...)
	}
	z := gz(body)
	write(t, filepath.Join(dir, "events.jsonl.2.gz"), z[:len(z)/2])
	r, err := scan(t, []string{dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.evs) == 0 || len(r.evs) >= 2000 {
		t.Fatalf("%d events", len(r.evs))
	}
	last := r.warns[len(r.warns)-1]
	if !strings.Contains(last, "unexpected EOF; rest of file skipped") {
		t.Fatalf("warnings %q", r.warns)
	}
}

func TestScanLongLinesAndCRLF(t *testing.T) {
	dir := t.TempDir()
	big := ev("a", 2)
	big.Message = strings.Repeat("x", 3*readBuffer)
	body := lines(ev("a", 1), big)
	body = append(body, bytes.TrimSuffix(lines(ev("a", 3)), []byte("\n"))...)
	body = append(body, "\r\n"...)
	write(t, filepath.Join(dir, "events.jsonl"), body)
	r, err := scan(t, []string{dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.evs) != 3 || r.evs[1].Message != big.Message || r.evs[2].Message != "m3" || len(r.warns) != 0 {
		t.Fatalf("%d events, warnings %q", len(r.evs), r.warns)
	}

	over := strings.Repeat("y", maxLine+10)
	write(t, filepath.Join(dir, "events.jsonl"), append(append(lines(ev("a", 1)), over+"\n"+over+"\n"...), lines(ev("a", 5))...))
	r, err = scan(t, []string{dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := messages(r.evs); !slices.Equal(got, []string{"a/m1", "a/m5"}) || r.tot.Malformed != 2 || r.tot.Lines != 4 {
		t.Fatalf("events %v totals %+v warns %q", got, r.tot, r.warns)
	}
}

func TestScanManyFilesInOrderAndStop(t *testing.T) {
	dir := t.TempDir()
	var want []string
	for f := range 40 {
		var body []byte
		for i := range 3000 {
			e := ev(fmt.Sprintf("n%02d", f), i)
			body = append(body, lines(e)...)
			want = append(want, e.Node+"/"+e.Message)
		}
		name := filepath.Join(dir, fmt.Sprintf("n%02d.events.jsonl", f))
		if f%3 == 0 {
			body = gz(body)
		}
		write(t, name, body)
	}
	r, err := scan(t, []string{dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := messages(r.evs); !slices.Equal(got, want) {
		t.Fatalf("events out of order (%d events, want %d)", len(got), len(want))
	}
	stop := errors.New("stop")
	n := 0
	err = Scan(context.Background(), []string{dir}, nil, nil, func(Event) error {
		if n++; n == 5000 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 5000 {
		t.Fatalf("err %v after %d events", err, n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Scan(ctx, []string{dir}, nil, nil, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

// The fast path must decode exactly as encoding/json does, or defer to it.
func TestParseMatchesEncodingJSON(t *testing.T) {
	for _, line := range parseCorpus() {
		checkParse(t, []byte(line))
	}
}

func FuzzParse(f *testing.F) {
	for _, line := range parseCorpus() {
		f.Add([]byte(line))
	}
	f.Fuzz(func(t *testing.T, line []byte) { checkParse(t, line) })
}

func checkParse(t *testing.T, line []byte) {
	t.Helper()
	var want Event
	wantErr := json.Unmarshal(line, &want)
	p := lineParser{strs: map[string]string{}}
	var got Event
	gotErr := p.parse(line, &got)
	if (wantErr == nil) != (gotErr == nil) || wantErr != nil && wantErr.Error() != gotErr.Error() {
		t.Fatalf("%q: error %v, encoding/json says %v", line, gotErr, wantErr)
	}
	if wantErr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\n got %#v\nwant %#v", line, got, want)
	}
}

func parseCorpus() []string {
	hb := Event{Time: time.Date(2025, 3, 4, 5, 6, 7, 890000000, time.FixedZone("", 3600)), Kind: KindHeartbeat, Node: "gpu001", By: "healthcheck", Hours: 23.75, Serials: []string{"1650924012345", "1650924012346"}, BootID: "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"}
	tr := Event{Time: time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC), Kind: KindTransition, Node: "gpu001", Check: "gpu.ecc", Component: "gpu3", Serial: "1650924012345", Status: "FAIL", Previous: "OK", Message: "volatile DBE 2 > 0", Action: "reset-gpu", JobID: "123", BootID: "x"}
	dr := Event{Time: time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC), Kind: KindDrain, Node: "gpu001", Message: "gpuhc: host.mounts: /scratch: not mounted <&>", Backend: "rest", By: "gpuhc-drain:root"}
	v := 52.3846
	me := Event{Time: time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC), Kind: KindMeasurement, Node: "gpu001", Check: "bandwidth", Component: "gpu0/h2d", Serial: "1650924012345", Status: "OK", Message: "H2D 52.4 GB/s >= 48", By: "prolog", Name: "h2d", Value: &v, Unit: "GB/s", Floor: 48, JobID: "123", BootID: "x"}
	zero := 0.0
	mz := Event{Kind: KindMeasurement, Node: "n", Name: "h2d", Value: &zero, Unit: "GB/s"}
	out := []string{string(lines(hb)), string(lines(tr)), string(lines(dr)), string(lines(me)), string(lines(mz))}
	for _, s := range []string{
		`{}`, ` { } `, `{"time":"2025-01-01T00:00:00Z","kind":"heartbeat","node":"n","hours":24,"serials":[]}`,
		`{"time":"2025-01-01T00:00:00Z","hours":0}`, `{"hours":-0}`, `{"hours":-1.5e3}`, `{"hours":1e400}`, `{"hours":01}`,
		`{"hours":12345678901234567890}`, `{"hours":1.}`, `{"hours":.5}`, `{"hours":1e}`, `{"hours":"24"}`, `{"hours":null}`,
		`{"serials":null}`, `{"serials":["a",]}`, `{"serials":["a" , "b" ]}`, `{"serials":[1]}`, `{"serials":"a"}`,
		`{"node":"a","node":"b"}`, `{"Node":"a"}`, `{"node":"a\"b"}`, `{"node":"é"}`, "{\"node\":\"a\tb\"}", `{"node":"\u00e9"}`,
		`{"node":1}`, `{"node":null}`, `{"other":"x"}`, `{"time":"2025-13-01T00:00:00Z"}`, `{"time":"2025-01-01 00:00:00Z"}`,
		`{"time":null}`, `{"time":"2025-01-01T00:00:00+01:00"}`, `{"node":"a"} x`, `{"node":"a"}}`, `{"node":"a",}`, `{"node" "a"}`,
		`{"value":1.5,"value":2}`, `{"value":null}`, `{"value":-0}`, `{"value":"1"}`, `{"floor":1e3,"unit":"GB/s","name":"p2p"}`,
		`[]`, `null`, ``, `{`, `{"node":"a"`, "{\"node\":\"a\"}\r", `{"job_id":"","boot_id":""}`,
	} {
		out = append(out, s)
	}
	return out
}

func BenchmarkParseHeartbeat(b *testing.B) {
	line := lines(Event{Time: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), Kind: KindHeartbeat, Node: "gpu00123", By: "healthcheck", Hours: 24,
		Serials: []string{"1650924012345", "1650924012346", "1650924012347", "1650924012348", "1650924012349", "1650924012350", "1650924012351", "1650924012352"},
		BootID:  "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"})
	line = line[:len(line)-1]
	p := lineParser{strs: map[string]string{}}
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		var e Event
		if err := p.parse(line, &e); err != nil {
			b.Fatal(err)
		}
	}
}
