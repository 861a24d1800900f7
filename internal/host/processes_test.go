package host

import (
	"testing"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
)

func TestProcesses(t *testing.T) {
	stat := func(pid, comm, state string) string {
		return pid + " (" + comm + ") " + state + " 1 " + pid + " " + pid + " 0 -1 4194560 1843 0 0 0 12 7 0 0 20 0 1 0 9000 23351296 2718 18446744073709551615 1 1 0 0 0 0 0 4096 0 1 0 0 17 3 0 0 0 0 0 1 1 1 1 1 1 1 0\n"
	}
	tests := []struct {
		name      string
		overrides map[string]string
		required  []string
		want      map[string]want
	}{
		{"healthy", nil, []string{"systemd", "nv-hostengine", "slurmd", "(sd-pam)"}, map[string]want{
			"systemd":       {check.OK, "running"},
			"nv-hostengine": {check.OK, "running"},
			"slurmd":        {check.OK, "running"},
			"(sd-pam)":      {check.OK, "running"},
		}},
		{"name longer than comm found through argv[0]", nil, []string{"nvidia-persistenced"}, map[string]want{
			"nvidia-persistenced": {check.OK, "running"},
		}},
		{"missing process drains", nil, []string{"slurmd", "dcgm-exporter"}, map[string]want{
			"slurmd":        {check.OK, "running"},
			"dcgm-exporter": {check.Fail, "not running"},
		}},
		{"zombie does not count as running", nil, []string{"munged"}, map[string]want{
			"munged": {check.Fail, "not running"},
		}},
		{"same first 15 bytes but another argv[0] drains", nil, []string{"nvidia-persistenced-v2"}, map[string]want{
			"nvidia-persistenced-v2": {check.Fail, "not running"},
		}},
		{"prefix of a running name drains", nil, []string{"slurm", "nv-host"}, map[string]want{
			"slurm":   {check.Fail, "not running"},
			"nv-host": {check.Fail, "not running"},
		}},
		{"rewritten argv[0] cannot disprove a truncated comm",
			map[string]string{"proc/1234/cmdline": "nvidia-persistenced: worker\x00"},
			[]string{"nvidia-persistenced"}, map[string]want{
				"nvidia-persistenced": {check.OK, "running"},
			}},
		{"process vanished mid-scan is ignored",
			map[string]string{"proc/3000": asDir}, // the pid dir outlived its files
			[]string{"slurmd", "dcgm-exporter"}, map[string]want{
				"slurmd":        {check.OK, "running"},
				"dcgm-exporter": {check.Fail, "not running"},
			}},
		{"unreadable process makes a missing name an error, not a drain",
			map[string]string{"proc/3001/stat": asDir},
			[]string{"slurmd", "dcgm-exporter"}, map[string]want{
				"slurmd":        {check.OK, "running"},
				"dcgm-exporter": {check.Error, "not found, but 1 processes unreadable"},
			}},
		{"garbage stat makes a missing name an error, not a drain",
			map[string]string{"proc/3002/stat": "3002 no parens here\n"},
			[]string{"dcgm-exporter"}, map[string]want{
				"dcgm-exporter": {check.Error, "no (comm)"},
			}},
		{"comm with spaces and parentheses", map[string]string{"proc/3003/stat": stat("3003", "my (odd) d", "S")},
			[]string{"my (odd) d"}, map[string]want{
				"my (odd) d": {check.OK, "running"},
			}},
		{"no /proc is an error", map[string]string{"proc": remove}, []string{"slurmd"}, map[string]want{
			"host": {check.Error, "list "},
		}},
		{"empty name in config is an error", nil, []string{""}, map[string]want{
			"host": {check.Error, "empty process name"},
		}},
		{"nothing required skips", nil, nil, map[string]want{
			"host": {check.Skip, "no required processes configured"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := fixture(t, "processes/node", tc.overrides)
			rs := run(t, NewProcesses(root, config.Processes{Required: tc.required}))
			expect(t, nameProcesses, rs, tc.want)
		})
	}
}

func TestParseStat(t *testing.T) {
	tests := []struct {
		in    string
		comm  string
		state byte
		ok    bool
	}{
		{"812 (nv-hostengine) S 1 812 812 0 -1", "nv-hostengine", 'S', true},
		{"2100 ((sd-pam)) S 2099", "(sd-pam)", 'S', true},
		{"7 (a) b) Z 1", "a) b", 'Z', true},
		{"7 () R 1", "", 'R', true},
		{"7 (x)", "", 0, false},
		{"7 (x) SS 1", "", 0, false},
		{"7 x) S 1", "", 0, false},
		{"", "", 0, false},
	}
	for _, tc := range tests {
		comm, state, err := parseStat([]byte(tc.in))
		if (err == nil) != tc.ok || comm != tc.comm || state != tc.state {
			t.Errorf("parseStat(%q) = %q, %q, %v; want %q, %q, ok=%v", tc.in, comm, state, err, tc.comm, tc.state, tc.ok)
		}
	}
}

func TestProcessesHonoursContext(t *testing.T) {
	rs := NewProcesses(fixture(t, "processes/node", nil), config.Processes{Required: []string{"slurmd"}}).Run(cancelled())
	expect(t, nameProcesses, rs, map[string]want{"host": {check.Error, "interrupted"}})
}
