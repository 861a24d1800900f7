package slurm_test

// The ownership rules (docs/architecture.md#drain-reasons-and-ownership)
// run on what the REST client reads from each release. 24.11 keeps our
// reason after RESUME and 26.05 clears it, so the rules must rest on the
// DRAIN flag and the reason together. This is the policy engine with the
// real client against recorded answers.

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/policy"
	"github.com/gpuhc/gpuhc/internal/slurm"
)

// replay answers "METHOD /path" with recorded files in turn, the last
// one repeating, and counts what it was asked.
type replay struct {
	t       *testing.T
	release string
	mu      sync.Mutex
	routes  map[string][]string
	asked   map[string]int
}

func newReplay(t *testing.T, release string) *replay {
	return &replay{t: t, release: release, routes: map[string][]string{}, asked: map[string]int{}}
}

// on serves files (paths under testdata/rest/<release>/, status in the
// name: case.STATUS.json) for method and path.
func (p *replay) on(method, path string, files ...string) {
	p.routes[method+" "+path] = files
}

func (p *replay) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	key := r.Method + " " + r.URL.EscapedPath()
	p.asked[key]++
	files := p.routes[key]
	var file string
	switch len(files) {
	case 0:
	case 1:
		file = files[0]
	default:
		file, p.routes[key] = files[0], files[1:]
	}
	p.mu.Unlock()
	if file == "" {
		http.Error(w, "no route "+key, http.StatusNotFound)
		return
	}
	body, err := os.ReadFile(filepath.Join("testdata", "rest", p.release, file))
	if err != nil {
		p.t.Errorf("fixture: %v", err)
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(statusIn(p.t, file))
	w.Write(body)
}

func (p *replay) count(method, path string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.asked[method+" "+path]
}

// statusIn reads the HTTP status from case.STATUS.json.
func statusIn(t *testing.T, file string) int {
	parts := strings.Split(filepath.Base(file), ".")
	n, err := strconv.Atoi(parts[len(parts)-2])
	if len(parts) < 3 || err != nil || n < 100 || n > 599 {
		t.Errorf("no status in %s", file)
		return http.StatusInternalServerError
	}
	return n
}

// engine is the health check's policy for gpu001 through a REST client on
// p, storm guard off (it is not what these tests are about).
func engine(t *testing.T, p *replay) policy.Engine {
	t.Helper()
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("eyJ.test.token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rest, err := slurm.NewREST(srv.URL, "slurm", tok, 5*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	pol := config.Default().Policy
	pol.MaxDrainedFraction, pol.MaxDrainedNodes = 0, 0
	return policy.Engine{Node: "gpu001", Policy: pol, Ctl: rest}
}

// failing gives the reason the recordings drained with.
func failing() []check.Result {
	return []check.Result{{Check: "host.mounts", Component: "/scratch", Status: check.Fail,
		Message: "not mounted", Action: check.ActionDrain}}
}

func passing() []check.Result {
	return []check.Result{{Check: "host.mounts", Component: "/scratch", Status: check.OK, Message: "mounted"}}
}

const ourReason = "gpuhc: host.mounts: /scratch: not mounted"

// newest is each REST release with its newest API version, the one
// discovery picks.
func newest() []struct{ release, version string } {
	return []struct{ release, version string }{
		{"slurm-24.11", "v0.0.42"},
		{"slurm-26.05", "v0.0.45"},
	}
}

// step is one health check run: its results, and the outcome it must give.
type step struct {
	results []check.Result
	want    string
}

func runSteps(t *testing.T, e policy.Engine, steps []step) policy.State {
	t.Helper()
	var st policy.State
	for i, s := range steps {
		run, err := e.Apply(t.Context(), s.results, st)
		if err != nil {
			t.Fatalf("run %d: %v", i+1, err)
		}
		if run.Outcome.Kind != s.want {
			t.Fatalf("run %d: outcome %+v, want %s", i+1, run.Outcome, s.want)
		}
		st = run.State
	}
	return st
}

// Drain, resume after two healthy runs, fail again: the resumed node
// (24.11: our reason without DRAIN; 26.05: no reason) is drained again,
// not taken for a drain already in force.
func TestOwnershipDrainResumeDrainRecorded(t *testing.T) {
	for _, c := range newest() {
		t.Run(c.release, func(t *testing.T) {
			node := "/slurm/" + c.version + "/node/gpu001"
			p := newReplay(t, c.release)
			p.on("GET", "/openapi/v3", "openapi.200.json")
			p.on("GET", node, c.version+"/node_idle.200.json", c.version+"/node_drained.200.json",
				c.version+"/node_resumed_settled.200.json")
			p.on("POST", node, c.version+"/post_drain.200.json", c.version+"/post_resume.200.json",
				c.version+"/post_drain.200.json")
			st := runSteps(t, engine(t, p), []step{
				{failing(), policy.Drained},
				{passing(), policy.WaitingResume},
				{passing(), policy.Resumed},
				{failing(), policy.Drained},
			})
			if st.Drained == nil || st.Drained.Reason != ourReason {
				t.Errorf("state %+v, want our drain recorded", st)
			}
			if g, p := p.count("GET", node), p.count("POST", node); g != 3 || p != 3 {
				t.Errorf("%d reads, %d posts; want 3 and 3", g, p)
			}
		})
	}
}

// An admin's drain is left alone: no POST, and healthy runs never resume it.
func TestOwnershipForeignDrainRecorded(t *testing.T) {
	for _, c := range newest() {
		t.Run(c.release, func(t *testing.T) {
			node := "/slurm/" + c.version + "/node/gpu001"
			p := newReplay(t, c.release)
			p.on("GET", "/openapi/v3", "openapi.200.json")
			p.on("GET", node, c.version+"/node_foreign_drain.200.json")
			runSteps(t, engine(t, p), []step{
				{failing(), policy.ForeignDrain},
				{passing(), policy.Nothing},
				{passing(), policy.Nothing},
				{passing(), policy.Nothing},
			})
			if n := p.count("POST", node); n != 0 {
				t.Errorf("%d POSTs to a node an admin drained", n)
			}
		})
	}
}

// Someone else resumed our drain: once healthy, the engine finds the node
// no longer drained and lets go of it, whether the old reason is still
// there (24.11) or gone (26.05). It must not send a RESUME.
func TestOwnershipResumedBySomeoneElseRecorded(t *testing.T) {
	for _, c := range newest() {
		t.Run(c.release, func(t *testing.T) {
			node := "/slurm/" + c.version + "/node/gpu001"
			p := newReplay(t, c.release)
			p.on("GET", "/openapi/v3", "openapi.200.json")
			p.on("GET", node, c.version+"/node_idle.200.json", c.version+"/node_resumed_settled.200.json")
			p.on("POST", node, c.version+"/post_drain.200.json")
			st := runSteps(t, engine(t, p), []step{
				{failing(), policy.Drained},
				{passing(), policy.WaitingResume},
				{passing(), policy.Released},
				{passing(), policy.Nothing},
			})
			if st.Drained != nil {
				t.Errorf("still holds %+v", st.Drained)
			}
			if n := p.count("POST", node); n != 1 {
				t.Errorf("%d POSTs, want the drain only", n)
			}
		})
	}
}

// A slurmctld-set DOWN with a reason is someone else's: not drained over.
func TestOwnershipDownNodeRecorded(t *testing.T) {
	for _, c := range newest() {
		t.Run(c.release, func(t *testing.T) {
			node := "/slurm/" + c.version + "/node/gpu004"
			p := newReplay(t, c.release)
			p.on("GET", "/openapi/v3", "openapi.200.json")
			p.on("GET", node, c.version+"/node_down.200.json")
			e := engine(t, p)
			e.Node = "gpu004"
			runSteps(t, e, []step{{failing(), policy.ForeignDrain}})
			if n := p.count("POST", node); n != 0 {
				t.Errorf("%d POSTs to a DOWN node", n)
			}
		})
	}
}
