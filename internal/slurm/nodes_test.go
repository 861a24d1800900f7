package slurm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
)

// Listing every node, for the storm guard's count
// (docs/architecture.md#storm-guard).

// mixedCluster is what testdata's nodes_mixed / show_nodes_mixed recorded
// on 24.11: gpu001 resumed with the stale gpuhc reason, gpu002 drained by
// gpuhc, gpu003 drained by an admin, gpu004 never drained.
func mixedCluster(user string, at func(string) time.Time) []Node {
	return []Node{
		{Name: "gpu001", State: []string{"IDLE"}, Reason: ourReason, ReasonUser: user, ReasonTime: at("2026-11-30T05:54:47")},
		{Name: "gpu002", State: []string{"IDLE", "DRAIN"}, Reason: ourReason, ReasonUser: user, ReasonTime: at("2026-11-30T05:54:49")},
		{Name: "gpu003", State: []string{"IDLE", "DRAIN"}, Reason: "maintenance", ReasonUser: user, ReasonTime: at("2026-11-30T05:54:49")},
		{Name: "gpu004", State: []string{"IDLE"}},
	}
}

// mixedCluster2605 is the same scenario on 26.05: RESUME cleared
// gpu001's reason, so only the DRAIN flag and reason of gpu002 and gpu003
// remain to tell ours from an admin's.
func mixedCluster2605() []Node {
	at := utc("2026-12-02T14:07:00")
	return []Node{
		{Name: "gpu001", State: []string{"IDLE"}},
		{Name: "gpu002", State: []string{"IDLE", "DRAIN"}, Reason: ourReason, ReasonUser: "root", ReasonTime: at},
		{Name: "gpu003", State: []string{"IDLE", "DRAIN"}, Reason: "maintenance", ReasonUser: "root", ReasonTime: at},
		{Name: "gpu004", State: []string{"IDLE"}},
	}
}

func assertNodes(t *testing.T, got, want []Node) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d nodes, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		assertNode(t, got[i], want[i])
	}
}

func TestParseShowNodesRecorded(t *testing.T) {
	got, err := parseShowNodes(scontrolFixture(t, "slurm-24.11", "show_nodes_mixed.txt"), time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	assertNodes(t, got, mixedCluster("root", utc))
	got, err = parseShowNodes(scontrolFixture(t, "slurm-26.05", "show_nodes_mixed.txt"), time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	assertNodes(t, got, mixedCluster2605())

	// 22.05's test bed has one node: its list is that node's one line.
	for _, file := range []string{"show_node_idle.txt", "show_node_drained.txt"} {
		one, err := parseShowNodes(scontrolFixture(t, "slurm-22.05", file), time.UTC)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := parseShowNode(scontrolFixture(t, "slurm-22.05", file), "vm", time.UTC)
		assertNodes(t, one, []Node{want})
	}
}

// The same cluster reads the same through REST and scontrol.
func TestNodeListsAgree(t *testing.T) {
	for _, c := range []struct {
		release  string
		versions []string
	}{
		{"slurm-24.11", []string{"v0.0.40", "v0.0.41", "v0.0.42"}},
		{"slurm-26.05", versions2605()},
	} {
		sc, err := parseShowNodes(scontrolFixture(t, c.release, "show_nodes_mixed.txt"), time.UTC)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range c.versions {
			rest, err := allNodes(restFixture(t, c.release, v+"/nodes_mixed.200.json"))
			if err != nil {
				t.Fatal(err)
			}
			assertNodes(t, rest, sc)
		}
	}
}

// Single-node recordings of 22.05 and 24.11 (different releases and fields,
// as a mixed-version fleet would never print, but each line as recorded)
// joined into one list.
func TestParseShowNodesJoinedRecordings(t *testing.T) {
	var out bytes.Buffer
	for _, f := range []struct{ release, file string }{
		{"slurm-22.05", "show_node_foreign.txt"},
		{"slurm-24.11", "show_node_drained.txt"},
		{"slurm-24.11", "show_node_down.txt"},
	} {
		out.Write(scontrolFixture(t, f.release, f.file))
	}
	got, err := parseShowNodes(out.Bytes(), time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	var names, states []string
	for _, n := range got {
		names = append(names, n.Name)
		states = append(states, strings.Join(n.State, "+")+" "+n.Reason)
	}
	if want := []string{"vm", "gpu001", "gpu004"}; !reflect.DeepEqual(names, want) {
		t.Errorf("names %q, want %q", names, want)
	}
	want := []string{"IDLE+DRAIN maintenance", "IDLE+DRAIN " + ourReason, "DOWN gpuhc-e2e: slurmd stopped"}
	if !reflect.DeepEqual(states, want) {
		t.Errorf("states %q, want %q", states, want)
	}
}

// A reason holding a newline splits a node's -o line; the list must still
// read, with the whole reason.
func TestParseShowNodesReasonWithNewline(t *testing.T) {
	lines := strings.Split(strings.TrimSpace(string(scontrolFixture(t, "slurm-24.11", "show_nodes_mixed.txt"))), "\n")
	lines[2] = strings.Replace(lines[2], "Reason=maintenance [", "Reason=maintenance\nticket 42 [", 1)
	got, err := parseShowNodes([]byte(strings.Join(lines, "\n")+"\n"), time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || got[2].Reason != "maintenance ticket 42" || got[2].ReasonUser != "root" || !got[2].Drained() {
		t.Errorf("got %+v", got)
	}
}

func TestParseShowNodesRefusesGarbage(t *testing.T) {
	mixed := string(scontrolFixture(t, "slurm-24.11", "show_nodes_mixed.txt"))
	idle := string(scontrolFixture(t, "slurm-24.11", "show_node_idle.txt"))
	cases := map[string]string{
		"empty":           "",
		"blank lines":     "\n\n",
		"not found text":  string(scontrolFixture(t, "slurm-24.11", "show_node_unknown.txt")),
		"text first":      "No nodes in the system\n" + mixed,
		"a bad state":     strings.Replace(mixed, "State=IDLE+DRAIN", "State=DRAIN", 1),
		"a missing state": strings.Replace(mixed, "State=IDLE+DRAIN", "Stat=IDLE+DRAIN", 1),
		"listed twice":    mixed + idle,
		"no name":         strings.Replace(idle, "NodeName=gpu001", "NodeName=", 1),
		"json":            `{"nodes":[]}`,
	}
	for name, out := range cases {
		if ns, err := parseShowNodes([]byte(out), time.UTC); err == nil {
			t.Errorf("%s: accepted as %d nodes", name, len(ns))
		}
	}
}

func TestAllNodesRefusesGarbage(t *testing.T) {
	cases := map[string]string{
		"not json":     `<html>`,
		"no nodes":     `{"nodes":[]}`,
		"no nodes key": string(restFixture(t, "slurm-24.11", "v0.0.42/node_unknown.200.json")),
		"a bad state":  `{"nodes":[{"name":"n1","state":["IDLE"]},{"name":"n2","state":["DRAIN"]}]}`,
		"no name":      `{"nodes":[{"name":"","state":["IDLE"]}]}`,
		"twice":        `{"nodes":[{"name":"n1","state":["IDLE"]},{"name":"n1","state":["IDLE","DRAIN"]}]}`,
	}
	for name, body := range cases {
		if ns, err := allNodes([]byte(body)); err == nil {
			t.Errorf("%s: accepted as %+v", name, ns)
		}
	}
}

func TestScontrolNodesRecorded(t *testing.T) {
	for release, want := range map[string][]Node{
		"slurm-24.11": mixedCluster("root", utc),
		"slurm-26.05": mixedCluster2605(),
	} {
		f := newFakeScontrol(t)
		f.recorded(-1, release, "show_nodes_mixed")
		s := newTestScontrol(t, f)
		got, err := s.Nodes(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		assertNodes(t, got, want)
		if want := []string{"-o", "show", "nodes"}; !reflect.DeepEqual(f.argv(0), want) {
			t.Errorf("argv %q, want %q", f.argv(0), want)
		}
		if s.Calls() != 1 {
			t.Errorf("Calls %d", s.Calls())
		}
	}
}

func TestScontrolNodesFailures(t *testing.T) {
	for _, c := range []struct{ release, file, want string }{
		{"slurm-22.05", "show_node_ctld_down", "Unable to contact slurm controller"},
		{"slurm-24.11", "show_node_ctld_down", "Unable to contact slurm controller"},
		{"slurm-26.05", "show_node_ctld_down", "Unable to contact slurm controller"},
	} {
		f := newFakeScontrol(t)
		f.recorded(-1, c.release, c.file)
		_, err := newTestScontrol(t, f).Nodes(t.Context())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s/%s: %v", c.release, c.file, err)
		}
	}
	f := newFakeScontrol(t)
	f.answer(-1, []byte("garbage\n"), nil, 0)
	if _, err := newTestScontrol(t, f).Nodes(t.Context()); err == nil || !strings.Contains(err.Error(), "scontrol show nodes") {
		t.Errorf("garbage: %v", err)
	}
}

// Output over the cap is an error, not a list silently missing its end.
func TestScontrolOutputOverCapIsAnError(t *testing.T) {
	f := newFakeScontrol(t)
	f.recorded(-1, "slurm-24.11", "show_nodes_mixed")
	s := newTestScontrol(t, f)
	out := fixture(t, "scontrol", "slurm-24.11", "show_nodes_mixed.txt")
	if _, err := s.runCapped(t.Context(), len(out)-1, "-o", "show", "nodes"); err == nil || !strings.Contains(err.Error(), "output over") {
		t.Errorf("cut output: %v", err)
	}
	if b, err := s.runCapped(t.Context(), len(out), "-o", "show", "nodes"); err != nil || !bytes.Equal(b, out) {
		t.Errorf("output of exactly the cap: %v", err)
	}
}

func TestRESTNodesEveryVersion(t *testing.T) {
	type recordedList struct {
		release, version, file string
		want                   []Node
	}
	cases := []recordedList{
		{"slurm-22.05", "v0.0.38", "nodes_idle.200.json", []Node{{Name: "vm", State: []string{"IDLE"}}}},
	}
	var idle4 []Node
	for i := 1; i <= 4; i++ {
		idle4 = append(idle4, Node{Name: fmt.Sprintf("gpu%03d", i), State: []string{"IDLE"}})
	}
	for _, v := range []string{"v0.0.40", "v0.0.41", "v0.0.42"} {
		cases = append(cases,
			recordedList{"slurm-24.11", v, "nodes_idle.200.json", idle4},
			recordedList{"slurm-24.11", v, "nodes_mixed.200.json", mixedCluster("root", utc)})
	}
	for _, v := range versions2605() {
		cases = append(cases,
			recordedList{"slurm-26.05", v, "nodes_idle.200.json", idle4},
			recordedList{"slurm-26.05", v, "nodes_mixed.200.json", mixedCluster2605()})
	}
	for _, c := range cases {
		t.Run(c.release+"/"+c.version+"/"+c.file, func(t *testing.T) {
			f := newFake()
			f.on("GET", "/openapi/v3", reply{200, onlyVersion(t, c.release, c.version)})
			f.on("GET", "/slurm/"+c.version+"/nodes/", reply{200, restFixture(t, c.release, c.version+"/"+c.file)})
			r := newTestREST(t, serve(t, f))
			got, err := r.Nodes(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			assertNodes(t, got, c.want)
			if r.Calls() != 2 {
				t.Errorf("Calls %d, want discovery + 1", r.Calls())
			}
		})
	}
}

func TestRESTNodesErrors(t *testing.T) {
	cases := []struct {
		release, version, file string
		want                   string
	}{
		{"slurm-22.05", "v0.0.38", "ctld_down.500.json", "GET /slurm/v0.0.38/nodes/: HTTP 500"},
		{"slurm-24.11", "v0.0.42", "ctld_down.502.json", "HTTP 502"},
		{"slurm-24.11", "v0.0.42", "unauthorized.511.json", "HTTP 511"},
		{"slurm-26.05", "v0.0.45", "ctld_down.502.json", "GET /slurm/v0.0.45/nodes/: HTTP 502"},
		{"slurm-26.05", "v0.0.45", "unauthorized.511.json", "HTTP 511"},
	}
	for _, c := range cases {
		f := newFake()
		f.on("GET", "/openapi/v3", reply{200, onlyVersion(t, c.release, c.version)})
		f.on("GET", "/slurm/"+c.version+"/nodes/", reply{statusOf(t, c.file), restFixture(t, c.release, c.version+"/"+c.file)})
		_, err := newTestREST(t, serve(t, f)).Nodes(t.Context())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s/%s: %v", c.version, c.file, err)
		}
	}
}

// A large cluster's list is bigger than any other answer; it has its own cap.
func TestRESTNodesLargeCluster(t *testing.T) {
	const n = 40000
	type rn struct {
		Name   string   `json:"name"`
		State  []string `json:"state"`
		Reason string   `json:"reason"`
		Pad    string   `json:"architecture"`
	}
	nodes := make([]rn, n)
	for i := range nodes {
		nodes[i] = rn{Name: fmt.Sprintf("gpu%05d", i), State: []string{"IDLE"}, Pad: strings.Repeat("x", 200)}
	}
	nodes[7].State, nodes[7].Reason = []string{"MIXED", "DRAIN"}, ourReason
	body, _ := json.Marshal(map[string]any{"nodes": nodes, "errors": []any{}})
	if len(body) <= maxBody {
		t.Fatalf("test body %d bytes is not over maxBody", len(body))
	}
	f := newFake()
	openapiRoute(t, f, "slurm-24.11")
	f.on("GET", "/slurm/v0.0.42/nodes/", reply{200, body})
	got, err := newTestREST(t, serve(t, f)).Nodes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n || !got[7].Drained() || got[7].Base() != "MIXED" {
		t.Errorf("%d nodes, node 7 %+v", len(got), got[7])
	}
}

func TestAutoListsThroughREST(t *testing.T) {
	b := newBed(t, "auto", func(f *fakeSlurmrestd) {
		openapiRoute(t, f, "slurm-24.11")
		f.on("GET", "/slurm/v0.0.42/nodes/", reply{200, restFixture(t, "slurm-24.11", "v0.0.42/nodes_mixed.200.json")})
	})
	got, err := b.c.Nodes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	assertNodes(t, got, mixedCluster("root", utc))
	if b.sc.runs() != 0 || b.c.Calls() != 2 || b.c.Backend() != "rest v0.0.42" {
		t.Errorf("scontrol runs %d, Calls %d, Backend %q", b.sc.runs(), b.c.Calls(), b.c.Backend())
	}
}

// 22.05's slurmrestd could list nodes, but auto does not read through a
// slurmrestd it cannot drain through: scontrol lists.
func TestAutoListsThroughScontrolOn2205(t *testing.T) {
	b := newBed(t, "auto", func(f *fakeSlurmrestd) { openapiRoute(t, f, "slurm-22.05") })
	b.sc.recorded(-1, "slurm-22.05", "show_node_idle")
	got, err := b.c.Nodes(t.Context())
	if err != nil || len(got) != 1 || got[0].Name != "vm" {
		t.Fatalf("%+v %v", got, err)
	}
	if b.rest.count("GET", "/slurm/v0.0.38/nodes/") != 0 || b.sc.runs() != 1 || b.c.Backend() != "scontrol" {
		t.Errorf("http %d, scontrol %d, Backend %q", len(b.rest.requests()), b.sc.runs(), b.c.Backend())
	}
}

func TestAutoListFallsBackToScontrol(t *testing.T) {
	b := newBed(t, "auto", func(f *fakeSlurmrestd) {
		openapiRoute(t, f, "slurm-24.11")
		f.on("GET", "/slurm/v0.0.42/nodes/", reply{502, restFixture(t, "slurm-24.11", "v0.0.42/ctld_down.502.json")})
	})
	b.sc.recorded(-1, "slurm-24.11", "show_nodes_mixed")
	got, err := b.c.Nodes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	assertNodes(t, got, mixedCluster("root", utc))
	if n := b.rest.count("GET", "/slurm/v0.0.42/nodes/"); n != 3 {
		t.Errorf("REST tried %d times, want 1 + 2 retries", n)
	}
	if b.c.Backend() != "scontrol" || !strings.Contains(b.logText(), "list nodes") {
		t.Errorf("Backend %q, log %s", b.c.Backend(), b.logText())
	}
}

func TestRESTModeListErrorHasNoFallback(t *testing.T) {
	b := newBed(t, "rest", func(f *fakeSlurmrestd) {
		openapiRoute(t, f, "slurm-24.11")
		f.on("GET", "/slurm/v0.0.42/nodes/", reply{511, restFixture(t, "slurm-24.11", "v0.0.42/unauthorized.511.json")})
	})
	if _, err := b.c.Nodes(t.Context()); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("got %v", err)
	}
	if b.sc.runs() != 0 {
		t.Error("rest mode ran scontrol")
	}
}

// io.Copy (as os/exec uses it) must go through the cap: a capped that
// offered ReadFrom would be bypassed.
func TestCappedHoldsUnderCopy(t *testing.T) {
	c := &capped{limit: 10}
	n, err := io.Copy(c, strings.NewReader(strings.Repeat("x", 100)))
	if err != nil || n != 100 {
		t.Fatalf("copied %d, %v; the rest must be drained, not refused", n, err)
	}
	if c.buf.Len() != 10 || !c.cut {
		t.Errorf("kept %d bytes, cut %v", c.buf.Len(), c.cut)
	}
}
