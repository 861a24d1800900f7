package events

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// Any log on stdin: every line is counted once, as an event, a blank,
// a malformed or an invalid line; each event handed on has its time,
// node and kind; and the warnings stay at the documented handful.
func FuzzScan(f *testing.F) {
	for _, line := range parseCorpus() {
		f.Add([]byte(line + "\n" + line))
	}
	f.Add([]byte("{\"time\":\"2025-01-01T00:00:00Z\",\"kind\":\"drain\",\"node\":\"n\"}\n\n \n{\"node\":\"n\"}\nx\ny\n{\"time\""))
	f.Fuzz(func(t *testing.T, data []byte) {
		warns, events := 0, 0
		tot, err := ScanTotals(context.Background(), []string{"-"}, bytes.NewReader(data), func(string) { warns++ }, func(e Event) error {
			if e.Time.IsZero() || e.Node == "" || e.Kind == "" {
				t.Fatalf("%q: event %+v", data, e)
			}
			events++
			return nil
		})
		if err != nil || events != tot.Events || tot.Torn > 1 || tot.Torn > tot.Malformed || warns > warnPerFile+2 {
			t.Fatalf("%q: %+v, %d events, %d warnings, %v", data, tot, events, warns, err)
		}
		if bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
			return // gzip: counted after decompression
		}
		lines := bytes.Count(data, []byte("\n"))
		if !bytes.HasSuffix(data, []byte("\n")) && len(data) > 0 {
			lines++
		}
		blank := 0
		for _, l := range strings.Split(string(data), "\n") {
			if len(bytes.TrimSpace([]byte(l))) == 0 {
				blank++
			}
		}
		blank -= strings.Count(string(data), "\n") + 1 - lines // the empty text after a last newline is no line
		if tot.Lines != lines || tot.Bytes != int64(len(data)-bytes.Count(data, []byte("\n"))) || tot.Events+tot.Malformed+tot.Invalid+blank != lines {
			t.Fatalf("%q: %+v for %d lines, %d blank", data, tot, lines, blank)
		}
	})
}
