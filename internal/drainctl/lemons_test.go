package drainctl

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/slurm"
)

func weighted(w uint32, feats ...string) slurm.Node {
	return slurm.Node{Name: "gpu002", State: []string{"IDLE"}, Weight: w, Features: feats, ActiveFeatures: feats}
}

func qev(kind, orig, applied string) *events.Event {
	return &events.Event{Time: t0, Kind: kind, Node: "gpu002", Original: orig, Applied: applied, By: "gpuhc-drain:alice"}
}

func TestDecideApply(t *testing.T) {
	plain := quarantine{weight: weightSpec{n: 1000}, base: 1}
	feat := plain
	feat.feature = "gpuhc_lemon"
	forced := plain
	forced.force = true
	rel := quarantine{weight: weightSpec{rel: true, n: 500}, base: 1}
	cases := []struct {
		name       string
		n          slurm.Node
		last       *events.Event
		q          quarantine
		result     string
		orig, appl string
		detail     string
	}{
		{"apply", weighted(1), nil, plain, resApplied, "weight=1", "weight=1000", ""},
		{"apply with feature", weighted(1, "a100"), nil, feat, resApplied,
			"weight=1 features=a100 active_features=a100", "weight=1000 features=a100,gpuhc_lemon active_features=a100,gpuhc_lemon", ""},
		{"relative weight", weighted(1), nil, rel, resApplied, "weight=1", "weight=501", ""},
		{"already applied", weighted(1000), qev(events.KindQuarantineApplied, "weight=1", "weight=1000"), plain, resAlreadyApplied, "", "", "quarantined at"},
		{"already applied with feature", weighted(1000, "gpuhc_lemon"),
			qev(events.KindQuarantineApplied, "weight=1 features= active_features=", "weight=1000 features=gpuhc_lemon active_features=gpuhc_lemon"),
			feat, resAlreadyApplied, "", "", ""},
		{"admin-set weight refused", weighted(5), nil, plain, resRefused, "", "", "weight 5 is not 1"},
		{"admin-set weight forced", weighted(5), nil, forced, resApplied, "weight=5", "weight=1000", ""},
		{"admin changed an applied quarantine", weighted(7), qev(events.KindQuarantineApplied, "weight=1", "weight=1000"), plain, resRefused, "", "", "changed since"},
		{"forced again keeps the first original", weighted(7), qev(events.KindQuarantineApplied, "weight=1", "weight=1000"), forced, resApplied, "weight=1", "weight=1000", ""},
		{"after a revert, the restored weight is expected", weighted(3), qev(events.KindQuarantineReverted, "weight=1000", "weight=3"), plain, resApplied, "weight=3", "weight=1000", ""},
		{"after a revert, an admin's weight is refused", weighted(4), qev(events.KindQuarantineReverted, "weight=1000", "weight=3"), plain, resRefused, "", "", "weight 4 is not 3"},
		{"feature not ours refused", weighted(1, "gpuhc_lemon"), nil, feat, resRefused, "", "", "already has feature"},
		{"weight already higher", weighted(2000), nil, quarantine{weight: weightSpec{n: 1000}, base: 2000}, resRefused, "", "", "already at or above"},
		{"unreadable settings", slurm.Node{Name: "gpu002", State: []string{"IDLE"}, SettingsErr: "Weight=\"x\""}, nil, plain, resRefused, "", "", "unusable"},
		{"no weight", weighted(0), nil, plain, resRefused, "", "", "no weight"},
		{"bad record", weighted(1000), qev(events.KindQuarantineApplied, "weight=1", "bogus"), plain, resRefused, "", "", "unreadable"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := decideApply(c.n, c.last, c.q)
			if d.result != c.result || !strings.Contains(d.detail, c.detail) {
				t.Fatalf("got %s (%s), want %s (%q)", d.result, d.detail, c.result, c.detail)
			}
			if d.change != (c.result == resApplied) {
				t.Errorf("change %v", d.change)
			}
			if c.orig != "" && (d.original.String() != c.orig || d.applied.String() != c.appl) {
				t.Errorf("original %q applied %q, want %q %q", d.original, d.applied, c.orig, c.appl)
			}
		})
	}
}

func TestDecideRevert(t *testing.T) {
	applied := qev(events.KindQuarantineApplied, "weight=1", "weight=1000")
	withFeat := qev(events.KindQuarantineApplied, "weight=1 features=a100 active_features=a100",
		"weight=1000 features=a100,gpuhc_lemon active_features=a100,gpuhc_lemon")
	cases := []struct {
		name       string
		n          slurm.Node
		last       *events.Event
		force      bool
		result     string
		orig, appl string
		detail     string
	}{
		{"revert", weighted(1000), applied, false, resReverted, "weight=1000", "weight=1", ""},
		{"revert with feature (order ignored)", weighted(1000, "gpuhc_lemon", "a100"), withFeat, false, resReverted,
			"weight=1000 features=gpuhc_lemon,a100 active_features=gpuhc_lemon,a100", "weight=1 features=a100 active_features=a100", ""},
		{"changed by an admin", weighted(7), applied, false, resRefused, "", "", "changed since"},
		{"changed by an admin, forced", weighted(7), applied, true, resReverted, "weight=7", "weight=1", ""},
		{"feature removed by an admin", weighted(1000, "a100"), withFeat, false, resRefused, "", "", "changed since"},
		{"missing original", weighted(1000), qev(events.KindQuarantineApplied, "", "weight=1000"), false, resRefused, "", "", "no usable original"},
		{"never quarantined", weighted(1), nil, false, resNotQuarantined, "", "", "no quarantine recorded"},
		{"already reverted", weighted(1), qev(events.KindQuarantineReverted, "weight=1000", "weight=1"), false, resNotQuarantined, "", "", "reverted at"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := decideRevert(c.n, c.last, c.force)
			if d.result != c.result || !strings.Contains(d.detail, c.detail) {
				t.Fatalf("got %s (%s), want %s (%q)", d.result, d.detail, c.result, c.detail)
			}
			if c.orig != "" && (d.original.String() != c.orig || d.applied.String() != c.appl) {
				t.Errorf("original %q applied %q, want %q %q", d.original, d.applied, c.orig, c.appl)
			}
		})
	}
}

func TestParseSettings(t *testing.T) {
	for _, good := range []string{"weight=1", "weight=1000 features= active_features=", "weight=5 features=a,b active_features=a"} {
		s, err := parseSettings(good)
		if err != nil || s.String() != good {
			t.Errorf("%q: %v, %q", good, err, s)
		}
	}
	for _, bad := range []string{"", "weight=0", "weight=x", "weight=1 weight=2", "weight=1 features=a", "features=a active_features=a",
		"weight=1 color=red", "weight=1 features=a|b active_features=", "weight=99999999999"} {
		if s, err := parseSettings(bad); err == nil {
			t.Errorf("%q: accepted as %q", bad, s)
		}
	}
}

// lemonLog makes gpu002 a lemon: 4 episodes; gpu001 and gpu002 240 h each.
func lemonLog(b *bed) {
	for _, n := range []string{"gpu001", "gpu002"} {
		b.logEvents(n, events.Event{Time: t0, Kind: events.KindHeartbeat, Node: n, Hours: 240})
	}
	for i := 0; i < 4; i++ {
		at := t0.Add(-time.Duration(10-2*i) * time.Hour)
		b.logEvents("gpu002",
			events.Event{Time: at, Kind: events.KindTransition, Node: "gpu002", Check: "gpu.xid", Component: "gpu3", Serial: "S3", Status: "FAIL", Previous: "OK"},
			events.Event{Time: at.Add(time.Hour), Kind: events.KindTransition, Node: "gpu002", Check: "gpu.xid", Component: "gpu3", Serial: "S3", Status: "OK", Previous: "FAIL"})
	}
}

func quarantineEvents(b *bed, node string) []events.Event {
	var out []events.Event
	for _, ev := range b.events(node) {
		if strings.HasPrefix(ev.Kind, "quarantine") {
			out = append(out, ev)
		}
	}
	return out
}

func TestLemonsRankingJSON(t *testing.T) {
	b := newBed(t, weighted(1))
	lemonLog(b)
	b.mustRun(0, "lemons", "--json", "--window", "30d")
	var rep lemonsReport
	if err := json.Unmarshal([]byte(b.stdout), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Lemons) != 2 || rep.Lemons[0].Key != "gpu002" || rep.Lemons[0].XFleet == nil || *rep.Lemons[0].XFleet != 2 {
		t.Fatalf("%s", b.stdout)
	}
	b.mustRun(0, "lemons")
	if !strings.Contains(b.stdout, "gpu002") || !strings.Contains(b.stdout, "X FLEET") {
		t.Errorf("table:\n%s", b.stdout)
	}
	b.mustRun(2, "lemons", "--window", "30d", "--since", "2d")
	b.mustRun(2, "lemons", "gpu002")
	b.mustRun(2, "lemons", "--apply", "--revert")
	b.mustRun(2, "lemons", "--apply", "--weight", "0")
}

func TestLemonsApplyRevert(t *testing.T) {
	b := newBed(t, weighted(1), slurm.Node{Name: "gpu001", State: []string{"IDLE"}, Weight: 1})
	lemonLog(b)
	b.mustRun(0, "lemons", "--apply", "--dry-run")
	if b.ctl.nodes["gpu002"].Weight != 1 || len(quarantineEvents(b, "gpu002")) != 0 || !strings.Contains(b.stdout, resWouldApply) {
		t.Fatalf("dry run changed something:\n%s", b.stdout)
	}
	b.mustRun(0, "lemons", "--apply", "--feature", "gpuhc_lemon")
	n := b.ctl.nodes["gpu002"]
	if n.Weight != 1000 || strings.Join(n.ActiveFeatures, ",") != "gpuhc_lemon" || b.ctl.nodes["gpu001"].Weight != 1 {
		t.Fatalf("node %+v\n%s", n, b.stdout)
	}
	evs := quarantineEvents(b, "gpu002")
	if len(evs) != 1 || evs[0].Kind != events.KindQuarantineApplied || evs[0].Original != "weight=1 features= active_features=" ||
		evs[0].Applied != "weight=1000 features=gpuhc_lemon active_features=gpuhc_lemon" || evs[0].By != "gpuhc-drain:alice" || evs[0].Backend != "fake" {
		t.Fatalf("events %+v", evs)
	}
	b.now = b.now.Add(time.Minute)
	b.mustRun(0, "lemons", "--apply", "--feature", "gpuhc_lemon")
	if len(quarantineEvents(b, "gpu002")) != 1 || !strings.Contains(b.stdout, resAlreadyApplied) {
		t.Fatalf("second apply:\n%s", b.stdout)
	}
	// An admin changes the weight: revert refuses it.
	n.Weight = 7
	b.ctl.nodes["gpu002"] = n
	b.mustRun(1, "lemons", "--revert")
	if b.ctl.nodes["gpu002"].Weight != 7 {
		t.Fatal("refused revert changed the node")
	}
	n.Weight = 1000
	b.ctl.nodes["gpu002"] = n
	b.now = b.now.Add(time.Minute)
	b.mustRun(0, "lemons", "--revert")
	n = b.ctl.nodes["gpu002"]
	if n.Weight != 1 || len(n.ActiveFeatures) != 0 || len(n.Features) != 0 {
		t.Fatalf("after revert %+v\n%s", n, b.stdout)
	}
	evs = quarantineEvents(b, "gpu002")
	if len(evs) != 2 || evs[1].Kind != events.KindQuarantineReverted || evs[1].Applied != "weight=1 features= active_features=" {
		t.Fatalf("events %+v", evs)
	}
	b.now = b.now.Add(time.Minute)
	b.mustRun(0, "lemons", "--revert")
	if len(quarantineEvents(b, "gpu002")) != 2 || !strings.Contains(b.stdout, "no quarantined nodes") {
		t.Fatalf("second revert:\n%s", b.stdout)
	}
	// Not a lemon: refused by name.
	b.mustRun(1, "lemons", "--apply", "gpu001")
}

func TestLemonsApplyLostAnswer(t *testing.T) {
	b := newBed(t, weighted(1))
	lemonLog(b)
	b.ctl.lost["tune gpu002"] = true
	b.mustRun(0, "lemons", "--apply")
	if evs := quarantineEvents(b, "gpu002"); len(evs) != 1 || !strings.Contains(b.stdout, "answer was lost") {
		t.Fatalf("events %+v\n%s", evs, b.stdout)
	}
}
