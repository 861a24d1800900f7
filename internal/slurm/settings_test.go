package slurm

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// Every recorded node, REST (v0.0.38 to v0.0.45) and scontrol, has the
// slurm.conf default Weight=1 and no features.
func TestSettingsRecorded(t *testing.T) {
	for _, c := range recordedNodes() {
		got, err := pickNode(restFixture(t, c.release, c.version+"/"+c.file), c.name)
		if err != nil {
			t.Fatal(err)
		}
		if got.Weight != 1 || got.Features != nil || got.ActiveFeatures != nil || got.SettingsErr != "" {
			t.Errorf("%s/%s/%s: %+v", c.release, c.version, c.file, got)
		}
	}
	for rel, name := range map[string]string{"slurm-22.05": "vm", "slurm-24.11": "gpu001", "slurm-26.05": "gpu001"} {
		n, err := parseShowNode(scontrolFixture(t, rel, "show_node_idle.txt"), name, time.UTC)
		if err != nil {
			t.Fatal(err)
		}
		if n.Weight != 1 || n.Features != nil || n.ActiveFeatures != nil || n.SettingsErr != "" {
			t.Errorf("%s show_node_idle: %+v", rel, n)
		}
	}
}

func TestSettingsRESTShapes(t *testing.T) {
	node := func(extra string) string {
		return `{"nodes":[{"name":"n1","state":["IDLE"]` + extra + `}]}`
	}
	cases := []struct {
		extra        string
		weight       uint32
		avail, activ []string
		bad          bool
	}{
		{`,"weight":1000,"features":"a,b","active_features":"a"`, 1000, []string{"a", "b"}, []string{"a"}, false}, // v0.0.38
		{`,"weight":{"set":true,"infinite":false,"number":7},"features":["x"],"active_features":[]`, 7, []string{"x"}, nil, false},
		{`,"weight":{"set":false,"infinite":false,"number":0}`, 0, nil, nil, false},
		{`,"weight":-1`, 0, nil, nil, true},
		{`,"weight":4294967295`, 0, nil, nil, true},
		{`,"weight":"heavy"`, 0, nil, nil, true},
		{`,"weight":1,"features":["a b"]`, 0, nil, nil, true},
		{`,"weight":1,"active_features":"a|b"`, 0, nil, nil, true},
		{`,"weight":1,"features":{"x":1}`, 0, nil, nil, true},
	}
	for _, c := range cases {
		n, err := pickNode([]byte(node(c.extra)), "n1")
		if err != nil {
			t.Fatalf("%s: a bad setting failed the node: %v", c.extra, err)
		}
		if (n.SettingsErr != "") != c.bad || n.Weight != c.weight || !reflect.DeepEqual(n.Features, c.avail) || !reflect.DeepEqual(n.ActiveFeatures, c.activ) {
			t.Errorf("%s: %+v", c.extra, n)
		}
	}
}

func TestSettingsScontrol(t *testing.T) {
	idle := strings.TrimSpace(string(scontrolFixture(t, "slurm-24.11", "show_node_idle.txt")))
	set := strings.NewReplacer("AvailableFeatures=(null)", "AvailableFeatures=a100,gpuhc_lemon",
		"ActiveFeatures=(null)", "ActiveFeatures=gpuhc_lemon", "Weight=1 ", "Weight=1000 ").Replace(idle)
	n, err := parseShowNode([]byte(set), "gpu001", time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	if n.Weight != 1000 || !reflect.DeepEqual(n.Features, []string{"a100", "gpuhc_lemon"}) || !reflect.DeepEqual(n.ActiveFeatures, []string{"gpuhc_lemon"}) {
		t.Errorf("%+v", n)
	}
	// 26.05.5 shows a cleared active list as "ActiveFeatures=" (e2e).
	n, err = parseShowNode([]byte(strings.Replace(idle, "ActiveFeatures=(null)", "ActiveFeatures=", 1)), "gpu001", time.UTC)
	if err != nil || n.ActiveFeatures != nil || n.SettingsErr != "" {
		t.Errorf("empty ActiveFeatures: %+v %v", n, err)
	}
	for _, bad := range []string{"Weight=x ", "Weight=99999999999 "} {
		n, err := parseShowNode([]byte(strings.Replace(idle, "Weight=1 ", bad, 1)), "gpu001", time.UTC)
		if err != nil || n.SettingsErr == "" || n.Weight != 0 || n.Base() != "IDLE" {
			t.Errorf("%s: %+v %v", bad, n, err)
		}
	}
}

func TestScontrolTuneArgv(t *testing.T) {
	f := newFakeScontrol(t)
	s := newTestScontrol(t, f)
	w := uint32(1000)
	feats, none := []string{"a100", "gpuhc_lemon"}, []string{}
	if err := s.Tune(t.Context(), "gpu001", Settings{Weight: &w, Features: &feats, ActiveFeatures: &none}); err != nil {
		t.Fatal(err)
	}
	want := []string{"update", "NodeName=gpu001", "Weight=1000", "AvailableFeatures=a100,gpuhc_lemon", "ActiveFeatures="}
	if got := f.argv(0); !reflect.DeepEqual(got, want) {
		t.Errorf("argv %q, want %q", got, want)
	}
	evil := []string{"x State=DOWN"}
	for _, bad := range []Settings{{}, {Features: &evil}, {Weight: ptr(uint32(0xffffffff))}} {
		if err := s.Tune(t.Context(), "gpu001", bad); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if f.runs() != 1 {
		t.Errorf("%d runs", f.runs())
	}
}

func ptr[T any](v T) *T { return &v }

func TestRESTTuneBody(t *testing.T) {
	for _, c := range []struct{ release, version string }{{"slurm-24.11", "v0.0.42"}, {"slurm-26.05", "v0.0.45"}} {
		f := recordedServer(t, c.release, c.version, "gpu001", map[string]string{"POST /slurm/{v}/node/{n}": "post_resume.200.json"})
		r := newTestREST(t, serve(t, f))
		w := uint32(1000)
		feats, none := []string{"gpuhc_lemon"}, []string{}
		if err := r.Tune(t.Context(), "gpu001", Settings{Weight: &w, Features: &feats, ActiveFeatures: &none}); err != nil {
			t.Fatal(err)
		}
		var body string
		for _, q := range f.requests() {
			if q.method == "POST" {
				body = q.body
			}
		}
		want := `{"weight":{"set":true,"infinite":false,"number":1000},"features":["gpuhc_lemon"],"features_act":""}`
		if body != want {
			t.Errorf("%s: body %s, want %s", c.version, body, want)
		}
		if err := r.Tune(t.Context(), "gpu001", Settings{Weight: &w}); err != nil {
			t.Fatal(err)
		}
		if got := f.requests()[len(f.requests())-1].body; got != `{"weight":{"set":true,"infinite":false,"number":1000}}` {
			t.Errorf("weight only: %s", got)
		}
	}
}
