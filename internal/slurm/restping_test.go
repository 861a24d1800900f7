package slurm

import (
	"errors"
	"strings"
	"testing"
)

// Every recorded ping answer, through the whole client: discovery picks
// the version under test, Ping reads its answer.
func TestRESTPingRecorded(t *testing.T) {
	type pingCase struct {
		release, version, file string
		ok                     bool
		why                    string // in the error, where not ok
		refused                bool   // the error is ErrUnauthorized
	}
	cases := []pingCase{
		{"slurm-22.05", "v0.0.38", "ping.200.json", true, "", false},
		{"slurm-24.11", "v0.0.40", "ping.200.json", true, "", false},
		{"slurm-24.11", "v0.0.41", "ping.200.json", true, "", false},
		{"slurm-24.11", "v0.0.42", "ping.200.json", true, "", false},
		// 24.11 answers 200 "DOWN" for a refused token, as for a dead slurmctld.
		{"slurm-24.11", "v0.0.40", "unauthorized_ping.200.json", false, "", false},
		{"slurm-24.11", "v0.0.42", "unauthorized_ping.200.json", false, "", false},
		{"slurm-24.11", "v0.0.40", "ping_ctld_down.200.json", false, "", false},
		{"slurm-24.11", "v0.0.41", "ping_ctld_down.200.json", false, "", false},
		{"slurm-24.11", "v0.0.42", "ping_ctld_down.200.json", false, "", false},
		{"slurm-22.05", "v0.0.38", "unauthorized_ping.500.json", false, "", false},
		{"slurm-22.05", "v0.0.38", "ping_ctld_down.500.json", false, "", false},
	}
	for _, v := range []string{"v0.0.42", "v0.0.43", "v0.0.44"} {
		cases = append(cases,
			pingCase{"slurm-26.05", v, "ping.200.json", true, "", false},
			pingCase{"slurm-26.05", v, "ping_ctld_down.200.json", false, "vm DOWN", false},
			pingCase{"slurm-26.05", v, "unauthorized_ping.200.json", false, "vm DOWN", false})
	}
	// v0.0.45 says why slurmctld did not answer, a refused token included.
	cases = append(cases,
		pingCase{"slurm-26.05", "v0.0.45", "ping.200.json", true, "", false},
		pingCase{"slurm-26.05", "v0.0.45", "ping_ctld_down.200.json", false, "vm DOWN: Unable to contact slurm controller (connect failure)", false},
		pingCase{"slurm-26.05", "v0.0.45", "unauthorized_ping.200.json", false, "vm DOWN: Protocol authentication error", true})
	for _, c := range cases {
		t.Run(c.release+"/"+c.version+"/"+c.file, func(t *testing.T) {
			f := newFake()
			f.on("GET", "/openapi/v3", reply{200, onlyVersion(t, c.release, c.version)})
			f.on("GET", "/slurm/"+c.version+"/ping/", reply{statusOf(t, c.file), restFixture(t, c.release, c.version+"/"+c.file)})
			r := newTestREST(t, serve(t, f))
			err := r.Ping(t.Context())
			if (err == nil) != c.ok {
				t.Fatalf("err %v, want ok=%v", err, c.ok)
			}
			if f.count("GET", "/slurm/"+c.version+"/ping/") == 0 {
				t.Error("ping not sent to the discovered version")
			}
			if err != nil && !strings.Contains(err.Error(), "GET /slurm/"+c.version+"/ping/") {
				t.Errorf("error does not name the request: %v", err)
			}
			if err != nil && !strings.Contains(err.Error(), c.why) {
				t.Errorf("error lacks %q: %v", c.why, err)
			}
			if got := errors.Is(err, ErrUnauthorized); got != c.refused {
				t.Errorf("errors.Is(err, ErrUnauthorized) = %v, want %v: %v", got, c.refused, err)
			}
			if c.refused && !strings.Contains(err.Error(), "scontrol token username=slurm") {
				t.Errorf("refused token without the hint to renew it: %v", err)
			}
		})
	}
}

// checkPings reads each version's shape and refuses what it cannot read.
func TestCheckPings(t *testing.T) {
	cases := []struct {
		name, body string
		want       string // "" means up
	}{
		{"v0.0.38 up", `{"pings":[{"hostname":"vm","ping":"UP","status":0,"mode":"primary"}]}`, ""},
		{"v0.0.40 up", `{"pings":[{"hostname":"vm","pinged":"UP","latency":1112,"mode":"primary"}]}`, ""},
		{"v0.0.42 up", `{"pings":[{"hostname":"vm","pinged":"UP","responding":true,"latency":1,"mode":"primary","primary":true}]}`, ""},
		{"v0.0.45 up", `{"pings":[{"hostname":"vm","responding":true,"latency":1,"primary":true,"status":"No error"}]}`, ""},
		{"lower case", `{"pings":[{"hostname":"vm","ping":"up"}]}`, ""},
		{"backup up", `{"pings":[{"hostname":"a","responding":false},{"hostname":"b","responding":true}]}`, ""},
		{"v0.0.45 down", `{"pings":[{"hostname":"vm","responding":false,"primary":true}]}`, "no slurmctld UP (vm DOWN)"},
		{"v0.0.45 status", `{"pings":[{"hostname":"vm","responding":false,"status":"Protocol authentication error"}]}`, "(vm DOWN: Protocol authentication error)"},
		{"v0.0.38 status", `{"pings":[{"hostname":"vm","ping":"DOWN","status":-1}]}`, "(vm DOWN)"},
		{"v0.0.42 down", `{"pings":[{"hostname":"vm","pinged":"DOWN","responding":false}]}`, "no slurmctld UP (vm DOWN)"},
		{"all down", `{"pings":[{"hostname":"a","pinged":"DOWN"},{"hostname":"b","responding":false}]}`, "(a DOWN, b DOWN)"},
		{"disagree", `{"pings":[{"hostname":"vm","pinged":"UP","responding":false}]}`, "disagree"},
		{"odd word", `{"pings":[{"hostname":"vm","pinged":"MAYBE"}]}`, `"MAYBE"`},
		{"no state", `{"pings":[{"hostname":"vm","latency":5}]}`, errNoPingState.Error()},
		{"no hostname", `{"pings":[{"responding":true}]}`, "no hostname"},
		{"responding not bool", `{"pings":[{"hostname":"vm","responding":"yes"}]}`, "decode ping"},
		{"empty list", `{"pings":[]}`, "lists no controller"},
		{"no list", `{"errors":[]}`, "lists no controller"},
		{"not json", `<html>`, "decode ping"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := checkPings([]byte(c.body))
			switch {
			case c.want == "" && err != nil:
				t.Errorf("got %v, want up", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("got %v, want an error with %q", err, c.want)
			}
		})
	}
}
