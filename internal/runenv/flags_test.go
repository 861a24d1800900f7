package runenv

import (
	"bytes"
	"errors"
	"flag"
	"reflect"
	"strings"
	"testing"

	"github.com/gpuhc/gpuhc/internal/config"
)

func TestFlagsParse(t *testing.T) {
	def := config.DefaultPath
	tests := []struct {
		name    string
		args    []string
		want    Flags
		wantErr string
	}{
		{"defaults", nil, Flags{ConfigPath: def}, ""},
		{"explicit config", []string{"--config", "/x.toml"}, Flags{ConfigPath: "/x.toml", Explicit: true}, ""},
		// Naming the default path still makes it required.
		{"explicit default path", []string{"--config", def}, Flags{ConfigPath: def, Explicit: true}, ""},
		{"check-config FILE", []string{"--check-config", "/y.toml"}, Flags{ConfigPath: "/y.toml", Explicit: true, CheckConfig: true}, ""},
		{"check-config", []string{"--check-config"}, Flags{ConfigPath: def, CheckConfig: true}, ""},
		{"all", []string{"--dry-run", "--node", "gpu1", "--version", "--simulate", "dgxh100", "--inject", "gpu3:xid=79", "--inject", "gpu1:xid=48,gpu2:xid=94"},
			Flags{ConfigPath: def, DryRun: true, Node: "gpu1", ShowVersion: true, Simulate: "dgxh100", Inject: []string{"gpu3:xid=79", "gpu1:xid=48,gpu2:xid=94"}}, ""},
		{"program's own flag", []string{"--own"}, Flags{ConfigPath: def}, ""},
		{"inject without simulate", []string{"--inject", "gpu3:xid=79"}, Flags{}, "--inject needs --simulate"},
		{"extra argument", []string{"extra"}, Flags{}, `unexpected argument "extra"`},
		{"two check-config files", []string{"--check-config", "a", "b"}, Flags{}, `unexpected argument "a"`},
		{"unknown flag", []string{"--bogus"}, Flags{}, "flag provided but not defined: -bogus"},
		{"help", []string{"--help"}, Flags{}, flag.ErrHelp.Error()},
		{"kernel log, dry run", []string{"--kernel-log", "/tmp/dmesg.txt", "--dry-run"}, Flags{ConfigPath: def, DryRun: true, KernelLog: "/tmp/dmesg.txt"}, ""},
		{"kernel log, simulate", []string{"--kernel-log", "k", "--simulate", "dgxb200"}, Flags{ConfigPath: def, Simulate: "dgxb200", KernelLog: "k"}, ""},
		{"kernel log on a live run", []string{"--kernel-log", "k"}, Flags{}, ErrKernelLogLive.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			fs := NewFlagSet("gpuhc-test", &stderr, "Usage: gpuhc-test\n", "\nExit status: 0\n")
			var f Flags
			f.Register(fs, "dry", "gpu3:xid=79")
			f.RegisterKernelLog(fs)
			fs.Bool("own", false, "a program's own flag")
			err := f.Parse(fs, tt.args)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(f, tt.want) {
				t.Errorf("got %+v, %v; want %+v", f, err, tt.want)
			}
		})
	}
}

func TestFlagSetHelp(t *testing.T) {
	var stderr bytes.Buffer
	fs := NewFlagSet("gpuhc-test", &stderr, "Usage: gpuhc-test\n\nOptions:\n", "\nExit status: 0\n")
	var f Flags
	f.Register(fs, "run the checks, changing nothing", "gpu3:xid=79 or gpu2:leftover=4242")
	if err := f.Parse(fs, []string{"--help"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	out := stderr.String()
	for _, want := range []string{"Usage: gpuhc-test\n\nOptions:\n  -check-config\n", "  -dry-run\n    \trun the checks, changing nothing\n",
		"e.g. gpu3:xid=79 or gpu2:leftover=4242 (repeatable", "  -version\n    \tprint the version and exit\n\nExit status: 0\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q:\n%s", want, out)
		}
	}
}

func TestNodeName(t *testing.T) {
	host := func(name string, err error) func() (string, error) {
		return func() (string, error) { return name, err }
	}
	noHost := host("", errors.New("uname failed"))
	tests := []struct {
		name, flag, slurmd string
		hostname           func() (string, error)
		want, wantErr      string
	}{
		{"--node first", "gpu1", "gpu2", host("gpu3", nil), "gpu1", ""},
		{"then SLURMD_NODENAME", "", "gpu2", host("gpu3", nil), "gpu2", ""},
		{"then the short host name", "", "", host("gpu3.cluster.example", nil), "gpu3", ""},
		{"no name at all", "", "", noHost, "", "no --node, no valid SLURMD_NODENAME and no host name: uname failed"},
		{"bad --node", "gpu[1-4]", "gpu2", noHost, "", "node name: "},
		{"bad SLURMD_NODENAME is not passed over", "", "node 1", host("gpu3", nil), "", "node name: "},
		{"bad host name", "", "", host("gpu 3", nil), "", "node name: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NodeName(tt.flag, tt.slurmd, tt.hostname)
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("got %q, %v; want error %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
