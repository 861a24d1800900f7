package drainctl

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gpuhc/gpuhc/internal/events"
	"github.com/gpuhc/gpuhc/internal/slurm"
	"github.com/gpuhc/gpuhc/internal/stats"
)

const lemonsAbout = `Ranks the lemons: the nodes and GPU serials with --lemon-min or more
failure episodes in the window, most episodes first, with their MTTF next
to the fleet's (X FLEET: how many times more often than the fleet's mean
node or GPU they fail).

--apply quarantines the node lemons (and the node of a GPU lemon seen in
one node only; NODES limits it to those nodes) without taking them out of
service: it raises their Slurm Weight (--weight, default 1000; the
scheduler gives jobs the lowest-weight nodes first, so large jobs land on
lemons last) and, with --feature NAME, adds NAME to their available and
active features (jobs can then avoid them with --constraint=!NAME... or
a job_submit rule). The node's settings before and after go to its event
log (quarantine-applied, Original and Applied). A node is left alone if
its weight is not --base-weight (slurm.conf's, default 1) or what gpuhc
last restored, as an admin may have set it; --force changes it anyway.
Applying twice changes nothing the second time.

--revert brings back the original settings recorded in the event log, on
NODES or every node whose last quarantine event is an apply, and records
quarantine-reverted; a node whose settings changed since gpuhc applied
them is refused without --force.

Slurm keeps a Weight or features set this way only until slurmctld
restarts (without -R) or reconfigures: then slurm.conf's apply again, and
gpuhc's record of the quarantine no longer matches the node (apply again).`

type lemonsOpts struct {
	statsOpts
	window     string
	apply      bool
	revert     bool
	weight     string
	feature    string
	baseWeight uint
	force      bool
	dryRun     bool
}

// lemonRow is one lemon, with its MTTF against the fleet's.
type lemonRow struct {
	stats.Lemon
	// FleetMTTF is the fleet's mean time between failures of one node
	// (kind node) or one GPU (kind gpu); XFleet is FleetMTTF/MTTF: how
	// many times more often it fails. Both nil when undefined.
	FleetMTTF *float64 `json:"fleet_mttf_hours"`
	XFleet    *float64 `json:"x_fleet"`
}

// lemonsReport is what lemons prints with --json.
type lemonsReport struct {
	Window       stats.Window `json:"window"`
	LemonMin     int          `json:"lemon_min"`
	Episodes     int          `json:"episodes"`
	NodeMTTF     *float64     `json:"node_mttf_hours"`
	GPUMTTF      *float64     `json:"gpu_mttf_hours"`
	Lemons       []lemonRow   `json:"lemons"`
	eventsCounts int
}

// quarantineRow is what --apply or --revert did to one node.
type quarantineRow struct {
	Node    string `json:"node"`
	Result  string `json:"result"`
	Before  string `json:"before,omitempty"`
	After   string `json:"after,omitempty"`
	Lemon   string `json:"lemon,omitempty"`
	Detail  string `json:"detail,omitempty"`
	Backend string `json:"backend,omitempty"`
	// unreachable: Slurm could not be read (exit 3, not 1).
	unreachable bool
}

func (r quarantineRow) ok() bool { return r.Result != resRefused && r.Result != resFailed }

func (p Program) lemons(args []string) error {
	var o lemonsOpts
	fs := p.statsFlags("lemons", "[--apply|--revert [NODES]]", lemonsAbout, &o.statsOpts)
	fs.StringVar(&o.window, "window", "", "the window as a `duration` back from --until or now (30d, 2w); excludes --since")
	fs.BoolVar(&o.apply, "apply", false, "quarantine the lemons: raise their weight (and add --feature)")
	fs.BoolVar(&o.revert, "revert", false, "undo the quarantine, from the original settings in the event log")
	fs.StringVar(&o.weight, "weight", strconv.Itoa(DefaultLemonWeight), "the quarantine's weight `N`, or +N to add N to the node's")
	fs.StringVar(&o.feature, "feature", "", "also add this active `feature` (e.g. gpuhc_lemon)")
	fs.UintVar(&o.baseWeight, "base-weight", 1, "the weight of a node nobody changed (slurm.conf's Weight; `N`)")
	fs.BoolVar(&o.force, "force", false, "change a node whose settings are not what gpuhc expects")
	fs.BoolVar(&o.dryRun, "dry-run", false, "read the nodes and say what would be done, changing nothing")
	pos, err := parse(fs, &o.common, args)
	if err != nil {
		return err
	}
	if err := o.check(pos, p.now()); err != nil {
		return err
	}
	q, err := o.quarantine()
	if err != nil {
		return err
	}
	var records []events.Event
	o.every = func(ev events.Event) {
		if ev.Kind == events.KindQuarantineApplied || ev.Kind == events.KindQuarantineReverted {
			records = append(records, ev)
		}
	}
	rep, partial, err := p.statsReport(&o.statsOpts, nil)
	if err != nil {
		return err
	}
	lr := lemonRanking(rep)
	if !o.apply && !o.revert {
		if err := printLemons(p, o.format(), lr); err != nil {
			return err
		}
		return partial
	}
	if partial != nil {
		// A quarantine record in an unread log could be missed: apply
		// would take an admin's weight for the default, revert miss it.
		return partial
	}
	nodes, why, err := quarantineTargets(&o, pos, lr, records)
	if err != nil {
		return err
	}
	return p.quarantineNodes(&o, q, nodes, why, records)
}

func (o *lemonsOpts) check(pos []string, now time.Time) error {
	if o.apply && o.revert {
		return usagef("--apply and --revert exclude each other")
	}
	if len(pos) > 0 && !o.apply && !o.revert {
		return usagef("NODES go with --apply or --revert (to rank some nodes only, use --node)")
	}
	if o.window != "" {
		if o.since != "" {
			return usagef("--window and --since exclude each other")
		}
		d, ok := parseAgo(o.window)
		if !ok || d <= 0 {
			return usagef("--window %q: want a duration (36h, 30d, 2w)", o.window)
		}
		end, err := parseWhen(o.until, now)
		if err != nil {
			return usagef("--until: %v", err)
		}
		if end.IsZero() {
			end = now
		}
		o.since = end.Add(-d).Format(time.RFC3339Nano)
	}
	return nil
}

func (o *lemonsOpts) quarantine() (quarantine, error) {
	w, err := parseWeightSpec(o.weight)
	if err != nil {
		return quarantine{}, err
	}
	if o.feature != "" {
		if err := slurm.ValidFeature(o.feature); err != nil {
			return quarantine{}, usagef("--feature: %v", err)
		}
	}
	if o.baseWeight == 0 || o.baseWeight > slurm.MaxWeight {
		return quarantine{}, usagef("--base-weight %d: want 1 to %d", o.baseWeight, uint32(slurm.MaxWeight))
	}
	return quarantine{weight: w, feature: o.feature, base: uint32(o.baseWeight), force: o.force}, nil
}

// lemonRanking adds the fleet's MTTF to each lemon: a node's against the
// mean node's (all node hours over all node episodes), a GPU's against
// the mean GPU's.
func lemonRanking(rep stats.Report) lemonsReport {
	mean := func(rows []stats.Row) *float64 {
		var h float64
		var e int
		for _, r := range rows {
			h, e = h+r.Hours, e+r.Episodes
		}
		if e == 0 || h <= 0 {
			return nil
		}
		v := h / float64(e)
		return &v
	}
	lr := lemonsReport{Window: rep.Window, LemonMin: rep.LemonMin, Episodes: rep.Fleet.Episodes,
		NodeMTTF: mean(rep.ByNode), GPUMTTF: mean(rep.BySerial), Lemons: []lemonRow{}, eventsCounts: rep.Events}
	for _, l := range rep.Lemons {
		row := lemonRow{Lemon: l, FleetMTTF: lr.NodeMTTF}
		if l.Kind == "gpu" {
			row.FleetMTTF = lr.GPUMTTF
		}
		if row.FleetMTTF != nil && l.MTTF != nil && *l.MTTF > 0 {
			x := *row.FleetMTTF / *l.MTTF
			row.XFleet = &x
		}
		lr.Lemons = append(lr.Lemons, row)
	}
	return lr
}

func printLemons(p Program, format string, lr lemonsReport) error {
	if format == formatJSON {
		return emit(p.Stdout, formatJSON, table{}, lr)
	}
	t := table{head: []string{"RANK", "KIND", "KEY", "EPISODES", "SHARE", "MTTF", "FLEET MTTF", "X FLEET", "DRAINS", "MTTR", "NODES"}}
	x := func(v *float64) string {
		if v == nil {
			return "-"
		}
		return fmt.Sprintf("%.1f", *v)
	}
	for _, l := range lr.Lemons {
		cells := []string{strconv.Itoa(l.Rank), l.Kind, l.Key, strconv.Itoa(l.Episodes),
			fmt.Sprintf("%.0f%%", 100*l.Share), hoursText(l.MTTF), hoursText(l.FleetMTTF), x(l.XFleet),
			strconv.Itoa(l.Drains), hoursText(l.MTTR), strings.Join(l.Nodes, ",")}
		if format == formatCSV {
			num := func(h *float64) string {
				if h == nil {
					return ""
				}
				return strconv.FormatFloat(*h, 'f', 4, 64)
			}
			cells[4], cells[5], cells[6], cells[7], cells[9] = strconv.FormatFloat(l.Share, 'f', 4, 64),
				num(l.MTTF), num(l.FleetMTTF), num(l.XFleet), num(l.MTTR)
			cells[10] = strings.Join(l.Nodes, " ")
		}
		t.rows = append(t.rows, cells)
	}
	if format == formatCSV {
		t.head[5], t.head[6], t.head[9] = "MTTF HOURS", "FLEET MTTF HOURS", "MTTR HOURS"
		return emit(p.Stdout, formatCSV, t, nil)
	}
	fmt.Fprintf(p.Stdout, "%s; %d episodes; fleet MTTF: node %s, GPU %s\n", windowLine(stats.Report{Window: lr.Window, Events: lr.eventsCounts}),
		lr.Episodes, hoursText(lr.NodeMTTF), hoursText(lr.GPUMTTF))
	t.empty = fmt.Sprintf("lemons (%d or more episodes): none", lr.LemonMin)
	return emit(p.Stdout, formatTable, t, nil)
}

// quarantineTargets are the nodes to act on, each with why: --apply the
// node lemons and the nodes of GPU lemons seen in one node, --revert the
// nodes whose last quarantine event is an apply; NODES limits either.
func quarantineTargets(o *lemonsOpts, pos []string, lr lemonsReport, records []events.Event) ([]string, map[string]string, error) {
	why := map[string]string{}
	var cands []string
	add := func(n, w string) {
		if _, ok := why[n]; ok {
			return
		}
		why[n] = w
		cands = append(cands, n)
	}
	if o.apply {
		for _, l := range lr.Lemons {
			switch {
			case l.Kind == "node":
				add(l.Key, fmt.Sprintf("#%d, %d episodes, MTTF %s", l.Rank, l.Episodes, hoursText(l.MTTF)))
			case l.Kind == "gpu" && len(l.Nodes) == 1:
				add(l.Nodes[0], fmt.Sprintf("#%d, GPU %s, %d episodes", l.Rank, l.Key, l.Episodes))
			}
		}
	} else {
		seen := map[string]bool{}
		for _, ev := range records {
			if seen[ev.Node] {
				continue
			}
			seen[ev.Node] = true
			if last := lastQuarantine(records, ev.Node); last.Kind == events.KindQuarantineApplied {
				add(ev.Node, "quarantined "+stamp(last.Time))
			}
		}
	}
	if len(pos) == 0 {
		return cands, why, nil
	}
	given, err := nodeArgs(pos)
	if err != nil {
		return nil, nil, err
	}
	var out []string
	for _, n := range given {
		if _, ok := why[n]; ok || o.revert {
			out = append(out, n)
			continue
		}
		why[n] = "" // not a lemon: refused below
		out = append(out, n)
	}
	return out, why, nil
}

// quarantineNodes applies or reverts on each node, records the events
// and prints a row per node.
func (p Program) quarantineNodes(o *lemonsOpts, q quarantine, nodes []string, why map[string]string, records []events.Event) error {
	if len(nodes) == 0 {
		what := "no lemons to quarantine"
		if o.revert {
			what = "no quarantined nodes to revert"
		}
		return emit(p.Stdout, o.format(), table{empty: what}, []quarantineRow{})
	}
	ctl, logClose, err := p.nodeControl(&o.common)
	if err != nil {
		return err
	}
	defer logClose.Close()
	tuner, ok := ctl.(slurm.Tuner)
	if !ok {
		return exitError{ExitUsage, fmt.Errorf("node control %s cannot change node settings", ctl.Backend())}
	}
	ctx, cancel := slurmContext()
	defer cancel()
	var rows []quarantineRow
	code := ExitOK
	for _, name := range nodes {
		row := quarantineRow{Node: name, Lemon: why[name]}
		var ev *events.Event
		if o.apply && why[name] == "" {
			row.Result, row.Detail = resRefused, "not a lemon in this window"
		} else {
			ev = p.quarantineOne(ctx, o, q, ctl, tuner, &row, lastQuarantine(records, name))
		}
		if ev != nil && !p.recordRow(ctx, &o.common, name, *ev, &row.Detail) {
			code = ExitRefused
		}
		if !row.ok() {
			code = ExitRefused
		}
		rows = append(rows, row)
	}
	for _, r := range rows {
		if r.unreachable {
			code = ExitInternal
		}
	}
	t := table{head: []string{"NODE", "RESULT", "BEFORE", "AFTER", "LEMON", "DETAIL"}}
	for _, r := range rows {
		t.rows = append(t.rows, []string{r.Node, r.Result, r.Before, r.After, r.Lemon, r.Detail})
	}
	if err := emit(p.Stdout, o.format(), t, rows); err != nil {
		return err
	}
	if code != ExitOK {
		return exitError{code: code}
	}
	return nil
}

// quarantineOne reads the node, decides, changes it and returns the
// event to record (nil: none).
func (p Program) quarantineOne(ctx context.Context, o *lemonsOpts, q quarantine, ctl slurm.Controller, tuner slurm.Tuner, row *quarantineRow, last *events.Event) *events.Event {
	n, err := ctl.Node(ctx, row.Node)
	if err != nil {
		row.Result, row.Detail, row.unreachable = resFailed, "read node: "+err.Error(), true
		if errors.Is(err, slurm.ErrNodeNotFound) {
			row.Result, row.Detail, row.unreachable = resRefused, "no such node", false
		}
		return nil
	}
	var d decision
	kind := events.KindQuarantineApplied
	if o.apply {
		d = decideApply(n, last, q)
	} else {
		d = decideRevert(n, last, o.force)
		kind = events.KindQuarantineReverted
	}
	row.Result, row.Detail = d.result, d.detail
	row.Before = current(n, q.feature != "" || d.applied.HasFeatures).String()
	if !d.change {
		if d.result == resAlreadyApplied {
			row.After = row.Before
		}
		return nil
	}
	row.Before, row.After = d.original.String(), d.applied.String()
	if o.dryRun {
		row.Result, row.Detail = resWouldApply, "dry run: nothing changed"
		if o.revert {
			row.Result = resWouldRevert
		}
		return nil
	}
	if err := tuner.Tune(ctx, n.Name, d.applied.tune()); err != nil {
		// A change slurmctld made but whose answer was lost still counts.
		m, rerr := ctl.Node(ctx, n.Name)
		switch {
		case rerr != nil:
			row.Result, row.unreachable = resFailed, true
			row.Detail = fmt.Sprintf("%v; reading the node again: %v", err, rerr)
			return nil
		case !current(m, d.applied.HasFeatures).same(d.applied):
			row.Result, row.Detail = resFailed, err.Error()
			return nil
		}
		row.Detail = fmt.Sprintf("changed, but Slurm's answer was lost (%v)", err)
	}
	row.Backend = ctl.Backend()
	ev := p.event(kind, n.Name, row.Lemon, ctl.Backend())
	if o.revert {
		ev.Message = ""
	}
	ev.Original, ev.Applied = d.original.String(), d.applied.String()
	return &ev
}
