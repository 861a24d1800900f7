package bandwidth

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/check"
)

func TestParseIBWriteBW(t *testing.T) {
	tests := []struct {
		sample string
		want   float64
		err    string
	}{
		{"ndr-client.txt", 391.38, ""},
		{"ndr-degraded-client.txt", 195.91, ""},
		{"roce-client.txt", 97.55, ""},
		{"gpudirect-client.txt", 372.41, ""},
		{"all-sizes-client.txt", 392.13, ""}, // -a: the largest size, last
		{"mbsec-client.txt", 0, `averages in "MB/sec", not Gb/sec`},
		{"completion-error-client.txt", 0, "result line \"Completion with error at client\": no message size"},
		{"ndr-server.txt", 0, `no "BW average" header`},
		{"refused-stderr.txt", 0, `no "BW average" header`},
		{"../nvbandwidth/garbage.txt", 0, `no "BW average" header`},
	}
	for _, tt := range tests {
		t.Run(tt.sample, func(t *testing.T) {
			got, err := parseIBWriteBW(readSample(t, "ib_write_bw/"+tt.sample))
			if got != tt.want || (tt.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.err)) {
				t.Errorf("got %v, %v; want %v, %q", got, err, tt.want, tt.err)
			}
		})
	}
	for _, bad := range []string{
		" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n 65536      5000             391.52\n",
		" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n 65536      5000             391.52   -4.0   1.0\n",
		" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n 65536      lots             391.52   391.0   1.0\n",
		" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n---\n",
	} {
		if v, err := parseIBWriteBW([]byte(bad)); err == nil {
			t.Errorf("%q: parsed %v", bad, v)
		}
	}
}

// fakePerftest is an ib_write_bw that acts as a server when its last
// argument is not an address, and as a client otherwise: the client is
// refused refusals times first, then prints client.txt and exits with
// clientStatus. Every call's arguments go to dir/calls.
func fakePerftest(t *testing.T, client string, refusals int, clientStatus, serverBody string) (tool, dir string) {
	t.Helper()
	dir = t.TempDir()
	for name, src := range map[string]string{"client.txt": client, "server.txt": "ndr-server.txt", "refused.txt": "refused-stderr.txt"} {
		if err := os.WriteFile(filepath.Join(dir, name), readSample(t, "ib_write_bw/"+src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if serverBody == "" {
		// Serve until the client has run, as the real server does.
		serverBody = "/bin/cat $d/server.txt\ni=0\nwhile [ ! -e $d/served ] && [ $i -lt 200 ]; do /bin/sleep 0.05; i=$((i+1)); done\nexit 0"
	}
	tool = fakeTool(t, `d=`+dir+`
last=""
for a in "$@"; do last="$a"; done
echo "$@" >> $d/calls
if [ "$last" != "127.0.0.1" ]; then
`+serverBody+`
fi
n=$(/bin/cat $d/tries 2>/dev/null || echo 0)
n=$((n+1)); echo $n > $d/tries
if [ $n -le `+strconv.Itoa(refusals)+` ]; then /bin/cat $d/refused.txt >&2; exit 1; fi
/bin/cat $d/client.txt
: > $d/served
exit `+clientStatus)
	return tool, dir
}

func TestIBWriteLoopback(t *testing.T) {
	tests := []struct {
		name         string
		client       string
		refusals     int
		clientStatus string
		serverBody   string
		floor        float64
		want         string
		worst        check.Status
	}{
		{"healthy NDR pair", "ndr-client.txt", 0, "0", "", 360,
			"mlx5_0-mlx5_1/ib_write OK ib_write_bw 391.4 Gb/s >= 360", check.OK},
		{"port at half speed", "ndr-degraded-client.txt", 0, "0", "", 360,
			"mlx5_0-mlx5_1/ib_write FAIL ib_write_bw 195.9 Gb/s < floor 360", check.Fail},
		{"no floor set", "roce-client.txt", 0, "0", "", 0,
			"mlx5_0-mlx5_1/ib_write OK ib_write_bw 97.5 Gb/s (no floor set)", check.OK},
		{"server slow to listen", "ndr-client.txt", 2, "0", "", 360,
			"mlx5_0-mlx5_1/ib_write OK ib_write_bw 391.4 Gb/s >= 360", check.OK},
		{"client fails", "completion-error-client.txt", 0, "1", "", 360,
			"mlx5_0-mlx5_1/ib_write ERROR ib_write_bw: ", check.Error},
		{"megabytes", "mbsec-client.txt", 0, "0", "", 360,
			`mlx5_0-mlx5_1/ib_write ERROR ib_write_bw: output not understood: averages in "MB/sec"`, check.Error},
		{"server cannot start", "ndr-client.txt", 0, "0", "echo \"Couldn't listen to port 18515\" >&2\nexit 1", 360,
			"mlx5_0-mlx5_1/ib_write ERROR ib_write_bw: server on mlx5_0 ended before the client ran: ", check.Error},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool, dir := fakePerftest(t, tt.client, tt.refusals, tt.clientStatus, tt.serverBody)
			c := toolConfig()
			c.IBWriteBW, c.IBWritePairs, c.IBWriteArgs, c.IBWriteGbps = tool, []string{"mlx5_0:mlx5_1"}, []string{"-x", "3"}, tt.floor
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			figs, rs := Measure(ctx, c, nil)
			got := summary(rs)
			if len(got) != 1 || !strings.HasPrefix(got[0], tt.want) || check.Worst(rs) != tt.worst {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
			if tt.worst == check.Fail && rs[0].Action != check.ActionDrain {
				t.Errorf("action %s", rs[0].Action)
			}
			if tt.worst != check.Error && (len(figs) != 1 || figs[0].Kind != KindIBWrite || figs[0].GBps*8 < 90 || figs[0].Floor != tt.floor/8) {
				t.Errorf("figures %+v", figs)
			}
			b, _ := os.ReadFile(filepath.Join(dir, "calls"))
			calls := strings.Split(strings.TrimSpace(string(b)), "\n")
			if calls[0] != "-d mlx5_0 -F --report_gbits -x 3" {
				t.Errorf("server args %q", calls[0])
			}
			if tt.worst != check.Error || tt.serverBody == "" {
				clients := calls[1:]
				if len(clients) != tt.refusals+1 || !slices.Contains(clients, "-d mlx5_1 -F --report_gbits -x 3 127.0.0.1") {
					t.Errorf("client calls %q", clients)
				}
			}
		})
	}
}

func TestIBWriteTimeout(t *testing.T) {
	// A server that never serves and a client that is always refused:
	// the run ends at the deadline with an ERROR.
	tool, _ := fakePerftest(t, "ndr-client.txt", 9, "0", "/bin/sleep 30")
	c := toolConfig()
	c.IBWriteBW, c.IBWritePairs = tool, []string{"mlx5_0:mlx5_1", "mlx5_2:mlx5_3"}
	ctx, cancel := context.WithTimeout(context.Background(), 800*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, rs := Measure(ctx, c, nil)
	if took := time.Since(start); took > 4*time.Second {
		t.Errorf("took %s", took)
	}
	got := summary(rs)
	if len(got) != 2 || !strings.HasPrefix(got[0], "mlx5_0-mlx5_1/ib_write ERROR ib_write_bw: ") ||
		got[1] != "mlx5_2-mlx5_3/ib_write ERROR ib_write_bw: "+tool+": not run: out of time" {
		t.Errorf("got %q", got)
	}
}
