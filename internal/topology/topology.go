// Package topology holds the topology check: where each GPU's nearest
// active InfiniBand/RoCE HCA sits on the PCI hierarchy (the same PCIe
// switch, the same root complex, the same NUMA node, another NUMA node of
// the same socket, or across sockets),
// whether every GPU funnels into one NIC, and optional bring-up pins of
// GPUs to HCAs.
//
// It reads sysfs under a root directory ("/" on a node, a fixture tree in
// tests): the resolved /sys/bus/pci/devices/<addr> links, numa_node, and
// each NUMA node's CPU package.
// Nothing is executed and nothing is written.
package topology

import (
	"context"
	"fmt"
	"slices"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/gpu"
	"github.com/gpuhc/gpuhc/internal/ib"
	"github.com/gpuhc/gpuhc/internal/pcibus"
	"github.com/gpuhc/gpuhc/internal/sysread"
)

// name is the check's name in results and drain reasons.
const name = "topology"

const componentHost = "host"

// GPU is one GPU as the check names it.
type GPU struct {
	Component string // "gpu3"
	PCIAddr   string // "0000:18:00.0"
	IDs       check.IDs
}

// GPUs lists the node's GPUs; nil, nil when it has none.
type GPUs func(context.Context) ([]GPU, error)

type topo struct {
	root    string
	devs    *ib.Gather
	cfg     config.Topology
	exclude []string
	gpus    GPUs
}

// New judges each GPU's nearest active HCA (HCAs matching exclude, the
// checks.ib.exclude globs, do not count). gpus lists the GPUs: FromNode
// for the NVML inventory; nil reads the PCI bus under root (FromBus).
// devs is the run's scan of the RDMA devices; root prefixes the PCI bus
// the GPUs and HCAs are placed on.
func New(root string, devs *ib.Gather, c config.Topology, exclude []string, gpus func(context.Context) ([]GPU, error)) check.Check {
	if gpus == nil {
		gpus = FromBus(pcibus.NewGather(root))
	}
	return &topo{root: root, devs: devs, cfg: c, exclude: exclude, gpus: gpus}
}

func (t *topo) Name() string { return name }

func (t *topo) Run(ctx context.Context) []check.Result {
	rs := t.run(ctx)
	for i := range rs {
		rs[i].Check = name
	}
	return rs
}

// rules is the configuration turned into statuses: OK means "not judged".
type rules struct {
	numa, numaSameSocket, sameSwitch, funnel check.Status
	funnelOn                                 bool
	pins                                     map[string]string // GPU address -> HCA
}

func parseRules(c config.Topology) (rules, error) {
	var r rules
	var err error
	if r.numa, err = mode("numa", c.NUMA); err != nil {
		return r, err
	}
	if r.numaSameSocket, err = mode("numa_same_socket", c.NUMASameSocket); err != nil {
		return r, err
	}
	if r.sameSwitch, err = mode("same_switch", c.SameSwitch); err != nil {
		return r, err
	}
	if r.funnel, err = mode("funnel", c.Funnel); err != nil {
		return r, err
	}
	r.funnelOn = c.Funnel != "off"
	r.pins = map[string]string{}
	for _, p := range c.Pairs {
		addr, hca, err := config.ParsePair(p)
		if err != nil {
			return r, fmt.Errorf("checks.topology.pairs: %w", err)
		}
		r.pins[addr] = hca
	}
	return r, nil
}

func mode(key, v string) (check.Status, error) {
	switch v {
	case "fail":
		return check.Fail, nil
	case "warn":
		return check.Warn, nil
	case "off":
		return check.OK, nil
	}
	return check.OK, fmt.Errorf("checks.topology.%s: %q: want fail, warn or off", key, v)
}

func (t *topo) run(ctx context.Context) []check.Result {
	if ctx.Err() != nil {
		return []check.Result{errorf(componentHost, check.IDs{}, "interrupted: %v", ctx.Err())}
	}
	r, err := parseRules(t.cfg)
	if err != nil {
		return []check.Result{errorf(componentHost, check.IDs{}, "%v", err)}
	}
	s, err := scan(ctx, t.root, t.devs, t.exclude, t.gpus)
	switch {
	case err != nil:
		return []check.Result{errorf(componentHost, check.IDs{}, "%v", err)}
	case s.skip != "":
		return []check.Result{result(componentHost, check.IDs{}, check.Skip, "%s", s.skip)}
	}
	f := s.funnel()
	var out []check.Result
	for _, g := range s.gpus {
		out = append(out, s.judge(g, r, f))
	}
	if f != nil && r.funnelOn {
		who := fmt.Sprintf("all %d GPUs", f.n)
		if f.n < len(s.gpus) {
			who = fmt.Sprintf("%d of %d GPUs", f.n, len(s.gpus))
		}
		out = append(out, result(componentHost, check.IDs{}, f.status(r), "%s funnel to %s (%s)", who, f.hca, f.far()))
	}
	out = append(out, s.missingPins(r)...)
	return out
}

// hcaInfo is one RDMA device as the check sees it.
type hcaInfo struct {
	name     string
	excluded bool // by checks.ib.exclude: all its ports, or the device
	// virtual is ib.HCA.Virtual: an SR-IOV VF, whose port follows its
	// PF's (and can be forced up while the PF link is down), or a device
	// off the PCI hierarchy (a sub-function, rxe, siw). Neither near nor
	// far from a GPU, it never serves as one's nearest HCA.
	virtual bool
	active  bool // a port not excluded is ACTIVE
	// stateErr is set when no port is known ACTIVE and some port's state
	// could not be read: it might be up.
	stateErr error
	dev      device
}

// gpuInfo is one GPU with the active HCAs it can reach, nearest first.
type gpuInfo struct {
	GPU
	dev   device
	links []link
	// doubts are HCAs that could not be placed, or whose state could not
	// be read: any might be nearer than links[0].
	doubts []doubt
}

type doubt struct {
	hca string
	err error
	at  *link // where it is, when that is known
}

func (g *gpuInfo) best() *link {
	if len(g.links) == 0 {
		return nil
	}
	return &g.links[0]
}

type scanned struct {
	hcas  []*hcaInfo
	gpus  []*gpuInfo
	skip  string // why the check does not apply
	count int    // HCAs not excluded
}

// scan discovers the HCAs and GPUs and places every GPU-HCA pair.
func scan(ctx context.Context, root string, devs *ib.Gather, exclude []string, gpus GPUs) (*scanned, error) {
	d, err := devs.Devices(ctx)
	if err != nil {
		return nil, fmt.Errorf("discover RDMA devices: %w", err)
	}
	// The NVSwitch management devices are left out: no GPU's traffic
	// goes through them.
	found := d.HCAs
	s := &scanned{}
	excluded, virtual := 0, 0
	for _, h := range found {
		hi := newHCA(h, exclude)
		s.hcas = append(s.hcas, hi)
		switch {
		case hi.excluded:
			excluded++
		case h.Virtual || hi.dev.addr == "":
			hi.virtual = true
			virtual++
		default:
			s.count++
		}
	}
	switch {
	case len(found) == 0:
		s.skip = "no RDMA devices"
		return s, nil
	case s.count == 0 && virtual == 0:
		s.skip = fmt.Sprintf("no RDMA devices outside checks.ib.exclude (%d excluded)", excluded)
		return s, nil
	case s.count == 0:
		s.skip = fmt.Sprintf("no physical RDMA devices outside checks.ib.exclude (%d excluded, %d virtual)", excluded, virtual)
		return s, nil
	}
	list, err := gpus(ctx)
	if err != nil {
		return nil, fmt.Errorf("list GPUs: %w", err)
	}
	if len(list) == 0 {
		s.skip = "no GPUs"
		return s, nil
	}
	for _, h := range s.hcas {
		if !h.excluded && !h.virtual {
			h.dev = locate(root, h.dev.addr)
		}
	}
	sk := &sockets{root: root, pkg: map[int]int{}}
	for _, g := range list {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("place GPUs: %w", err)
		}
		s.gpus = append(s.gpus, s.place(g, root, sk))
	}
	return s, nil
}

func newHCA(h ib.HCA, exclude []string) *hcaInfo {
	hi := &hcaInfo{name: h.Name, dev: device{addr: h.PCIAddr}}
	hi.excluded = ib.Excluded(exclude, h.Name, 0)
	if !hi.excluded && len(h.Ports) > 0 {
		hi.excluded = true
		for _, p := range h.Ports {
			if !ib.Excluded(exclude, h.Name, p.Num) {
				hi.excluded = false
			}
		}
	}
	for _, p := range h.Ports {
		if ib.Excluded(exclude, h.Name, p.Num) {
			continue
		}
		switch {
		case p.State == "ACTIVE":
			hi.active = true
		case p.State == "" && p.Err != nil && hi.stateErr == nil:
			hi.stateErr = fmt.Errorf("port %d: %w", p.Num, p.Err)
		}
	}
	if h.PortsErr != nil && hi.stateErr == nil {
		hi.stateErr = h.PortsErr // no ports read is not "no port active"
	}
	if hi.active {
		hi.stateErr = nil
	}
	return hi
}

func (s *scanned) place(g GPU, root string, sk *sockets) *gpuInfo {
	gi := &gpuInfo{GPU: g, dev: locate(root, gpu.NormalizePCI(g.PCIAddr))}
	gi.PCIAddr = gi.dev.addr
	if gi.dev.err != nil {
		return gi
	}
	for _, h := range s.hcas {
		if h.excluded || h.virtual || (!h.active && h.stateErr == nil) {
			continue
		}
		l, err := relate(gi.dev, h.dev, sk)
		l.hca = h
		switch {
		case err != nil:
			gi.doubts = append(gi.doubts, doubt{hca: h.name, err: err})
		case !h.active:
			gi.doubts = append(gi.doubts, doubt{hca: h.name, err: h.stateErr, at: &l})
		default:
			gi.links = append(gi.links, l)
		}
	}
	slices.SortFunc(gi.links, nearer)
	return gi
}

// funnelInfo is every GPU's nearest active HCA being one NIC.
type funnelInfo struct {
	hca      string
	n, cross int
	// unsure are GPUs reaching it on another NUMA node whose socket
	// cannot be told.
	unsure int
}

// status is the funnel's verdict: a funnel no GPU is known to reach
// across sockets is at most a WARN.
func (f *funnelInfo) status(r rules) check.Status {
	if f.cross == 0 {
		return min(r.funnel, check.Warn)
	}
	return r.funnel
}

func (f *funnelInfo) far() string {
	switch {
	case f.unsure == 0:
		return fmt.Sprintf("%d across sockets", f.cross)
	case f.cross == 0:
		return fmt.Sprintf("%d on other NUMA nodes, socket unknown", f.unsure)
	}
	return fmt.Sprintf("%d across sockets, %d on other NUMA nodes, socket unknown", f.cross, f.unsure)
}

// funnel reports every placed GPU funnelling to one HCA that some reach
// across sockets (or perhaps so: on another NUMA node, socket unknown).
// GPUs on other NUMA nodes of the NIC's own socket are no funnel. One GPU is no funnel: the NUMA rule covers it; nor are
// GPUs with two equally near HCAs, which they can share between them.
func (s *scanned) funnel() *funnelInfo {
	var f funnelInfo
	for _, g := range s.gpus {
		b := g.best()
		if b == nil {
			continue
		}
		if len(g.links) > 1 && asNear(g.links[1], *b) {
			return nil
		}
		if f.n > 0 && b.hca.name != f.hca {
			return nil
		}
		f.hca = b.hca.name
		f.n++
		switch b.rel {
		case relCross:
			f.cross++
		case relOtherNode:
			f.unsure++
		}
	}
	if f.n < 2 || f.cross+f.unsure == 0 {
		return nil
	}
	return &f
}

// judge gives one GPU's verdict: the NUMA and same-switch rules on its
// nearest active HCA, then its pin.
func (s *scanned) judge(g *gpuInfo, r rules, f *funnelInfo) check.Result {
	if g.dev.err != nil {
		return errorf(g.Component, g.IDs, "could not place GPU: %v", g.dev.err)
	}
	st, msg := s.rulesVerdict(g, r, f)
	if st > check.OK {
		if d := g.doubtNearer(); d != nil {
			st, msg = check.Error, fmt.Sprintf("could not check %s: %v", d.hca, d.err)
		}
	}
	if hca, ok := r.pins[g.PCIAddr]; ok {
		pst, pmsg := s.pinVerdict(g, hca)
		if pst > st || (pst == st && pst > check.OK) {
			st, msg = pst, pmsg
		} else if st == check.OK {
			msg += ", as pinned"
		}
	}
	return result(g.Component, g.IDs, st, "%s", msg)
}

func (s *scanned) rulesVerdict(g *gpuInfo, r rules, f *funnelInfo) (check.Status, string) {
	b := g.best()
	if b == nil {
		return max(r.numa, r.sameSwitch), fmt.Sprintf("no active HCA (%d %s, none with an ACTIVE port)", s.count, plural(s.count, "HCA"))
	}
	st := check.OK
	msg := fmt.Sprintf("nearest active HCA %s is %s", b.hca.name, b.where())
	switch b.rel {
	case relSocket:
		st = r.numaSameSocket
	case relUnknown:
		msg += ", not judged"
	case relOtherNode:
		// It may be another node of the GPU's own socket.
		st = min(r.numa, check.Warn)
	case relCross:
		st = r.numa
	}
	if b.farNode() && f != nil && r.funnelOn {
		// The funnel result names this fact once for the node; the GPUs
		// it leaves across sockets are judged no worse.
		st = min(st, f.status(r))
		msg += " (funnel, see host)"
	}
	if b.rel != relSwitch && r.sameSwitch > check.OK {
		st = max(st, r.sameSwitch)
		if b.rel != relCross && b.rel != relSocket && b.rel != relOtherNode {
			msg += ", not on the GPU's PCIe switch"
		}
	}
	return st, msg
}

// doubtNearer returns an HCA that could not be judged and might be
// nearer than the nearest known one, so that a verdict it could change
// is "could not check" rather than a false FAIL.
func (g *gpuInfo) doubtNearer() *doubt {
	b := g.best()
	for i, d := range g.doubts {
		if b == nil || d.at == nil || d.at.rel < b.rel {
			return &g.doubts[i]
		}
	}
	return nil
}

func (s *scanned) pinVerdict(g *gpuInfo, hca string) (check.Status, string) {
	i := slices.IndexFunc(s.hcas, func(h *hcaInfo) bool { return h.name == hca })
	if i < 0 {
		return check.Fail, fmt.Sprintf("pinned HCA %s not found", hca)
	}
	h := s.hcas[i]
	switch {
	case h.excluded:
		return check.Error, fmt.Sprintf("pinned HCA %s is excluded by checks.ib.exclude", hca)
	case h.virtual && h.dev.addr != "":
		return check.Error, fmt.Sprintf("pinned HCA %s is an SR-IOV virtual function", hca)
	case h.virtual:
		return check.Error, fmt.Sprintf("pinned HCA %s is not a PCI device", hca)
	case h.stateErr != nil:
		return check.Error, fmt.Sprintf("could not check pinned HCA %s: %v", hca, h.stateErr)
	case !h.active:
		return check.Fail, fmt.Sprintf("pinned HCA %s has no ACTIVE port", hca)
	}
	for _, d := range g.doubts {
		if d.hca == hca {
			return check.Error, fmt.Sprintf("could not check pinned HCA %s: %v", hca, d.err)
		}
	}
	j := slices.IndexFunc(g.links, func(l link) bool { return l.hca == h })
	b := g.best()
	if j < 0 || b == nil {
		return check.Error, fmt.Sprintf("could not place pinned HCA %s", hca)
	}
	// A tie is accepted: two HCAs on one switch are equally near.
	if pl := g.links[j]; !asNear(pl, *b) {
		if b.rel == relUnknown || b.rel == relOtherNode {
			// Where the nearest one really is is not known: it may be
			// no nearer than the pinned one.
			return check.Error, fmt.Sprintf("could not check pinned HCA %s: nearest active %s is %s", hca, b.hca.name, b.short())
		}
		return check.Fail, fmt.Sprintf("pinned HCA %s is %s; nearest active is %s, %s", hca, pl.short(), b.hca.name, b.short())
	}
	return check.OK, ""
}

// missingPins reports pinned GPUs that are not on the node.
func (s *scanned) missingPins(r rules) []check.Result {
	var addrs []string
	for addr := range r.pins {
		if !slices.ContainsFunc(s.gpus, func(g *gpuInfo) bool { return g.PCIAddr == addr }) {
			addrs = append(addrs, addr)
		}
	}
	slices.Sort(addrs)
	var out []check.Result
	for _, a := range addrs {
		out = append(out, result(a, check.IDs{PCIBusID: a}, check.Fail, "pinned GPU not found (pinned to %s)", r.pins[a]))
	}
	return out
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

func result(comp string, ids check.IDs, st check.Status, format string, a ...any) check.Result {
	act := check.ActionNone
	if st == check.Fail {
		// A GPU without a usable NIC nearby slows every multi-node job.
		act = check.ActionDrain
	}
	return check.Result{
		Component: printable(comp),
		Status:    st,
		Action:    act,
		Message:   printable(fmt.Sprintf(format, a...)),
		IDs:       ids,
	}
}

func errorf(comp string, ids check.IDs, format string, a ...any) check.Result {
	return result(comp, ids, check.Error, format, a...)
}

// printable is sysread.Printable, applied to every message and component.
func printable(s string) string { return sysread.Printable(s) }
