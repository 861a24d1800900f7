package promtest

import (
	"strings"
	"testing"
)

const good = `# HELP up Whether the target is up, with a \\ and a\nsecond line.
# TYPE up gauge
up 1
up{job="a\\b",instance="x\"y\nz",} 0
# a plain comment

# TYPE reqs_total counter
reqs_total{code="200"} 12
reqs_total{code="500"} 0
# TYPE lat histogram
lat_bucket{le="0.1"} 1
lat_bucket{le="+Inf"} 2
lat_sum 0.3
lat_count 2
# TYPE temp gauge
temp -1.5e3
temp{x="nan"} NaN
temp{x="inf"} +Inf
`

func TestParseGood(t *testing.T) {
	d, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(d.Order, " "); got != "up reqs_total lat temp" {
		t.Errorf("families %q", got)
	}
	if f := d.Families["up"]; f.Help != "Whether the target is up, with a \\ and a\nsecond line." || f.Type != "gauge" || len(f.Samples) != 2 {
		t.Errorf("up: %+v", f)
	}
	if v, ok := d.Value("up", "job", `a\b`, "instance", "x\"y\nz"); !ok || v != 0 {
		t.Errorf("escaped labels: %v %v", v, ok)
	}
	if v, ok := d.Value("temp"); !ok || v != -1500 {
		t.Errorf("temp: %v %v", v, ok)
	}
	if n := len(d.Samples("lat_bucket")); n != 2 {
		t.Errorf("buckets: %d", n)
	}
	if _, err := Parse(nil); err != nil {
		t.Errorf("empty: %v", err)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, tt := range []struct{ name, doc, want string }{
		{"no final newline", "# TYPE a gauge\na 1", "line feed"},
		{"no TYPE", "a 1\n", "no TYPE"},
		{"TYPE after samples", "# TYPE a gauge\na 1\n# TYPE a gauge\n", "second TYPE"},
		{"HELP twice", "# HELP a x\n# HELP a y\n", "second HELP"},
		{"unknown type", "# TYPE a gauges\n", "unknown type"},
		{"bad metric name", "# TYPE 1a gauge\n", "bad metric name"},
		{"bad sample name", "# TYPE a gauge\na-b 1\n", "bad metric name"},
		{"bad label name", "# TYPE a gauge\na{1x=\"v\"} 1\n", "bad label name"},
		{"reserved label name", "# TYPE a gauge\na{__name__=\"v\"} 1\n", "bad label name"},
		{"unquoted label", "# TYPE a gauge\na{x=v} 1\n", "not quoted"},
		{"unterminated label", "# TYPE a gauge\na{x=\"v} 1\n", "unterminated"},
		{"bad escape", "# TYPE a gauge\na{x=\"\\t\"} 1\n", "bad escape"},
		{"bad help escape", "# HELP a say \\\"hi\\\"\n", "bad escape"},
		{"label twice", "# TYPE a gauge\na{x=\"1\",x=\"2\"} 1\n", "twice"},
		{"space in labels", "# TYPE a gauge\na{x=\"1\", y=\"2\"} 1\n", "bad label name"},
		{"missing comma", "# TYPE a gauge\na{x=\"1\"y=\"2\"} 1\n", "expected ','"},
		{"no value", "# TYPE a gauge\na\n", "no value"},
		{"no blank", "# TYPE a gauge\na{x=\"1\"}1\n", "no blank"},
		{"bad value", "# TYPE a gauge\na 1,5\n", "bad value"},
		{"hex value", "# TYPE a gauge\na 0x10\n", "bad value"},
		{"timestamp", "# TYPE a gauge\na 1 1700000000000\n", "timestamp"},
		{"negative counter", "# TYPE a_total counter\na_total -1\n", "counter"},
		{"duplicate series", "# TYPE a gauge\na{x=\"1\",y=\"2\"} 1\na{y=\"2\",x=\"1\"} 2\n", "duplicate series"},
		{"not contiguous", "# TYPE a gauge\n# TYPE b gauge\na 1\n", "not contiguous"},
		{"leading blank", "# TYPE a gauge\n a 1\n", "blanks"},
		{"trailing blank", "# TYPE a gauge\na 1 \n", "blanks"},
		{"invalid UTF-8", "# TYPE a gauge\na{x=\"\xff\"} 1\n", "UTF-8"},
		{"bucket of a summary", "# TYPE s summary\ns_bucket 1\n", "no TYPE"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error with %q", err, tt.want)
			}
		})
	}
}
