package host

import (
	"context"
	"fmt"
	"os"
	"path"
	"strings"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/sysread"
)

type modules struct {
	root string
	cfg  config.Modules
}

// NewModules checks that each required kernel module is loaded or built
// into the kernel.
func NewModules(root string, c config.Modules) check.Check {
	return &modules{root: root, cfg: c}
}

func (m *modules) Name() string { return nameModules }

func (m *modules) Run(ctx context.Context) []check.Result {
	if len(m.cfg.Required) == 0 {
		return stamp(nameModules, []check.Result{skipf(componentHost, "no required modules configured")})
	}
	loaded, loadErr := m.loaded()
	builtin := m.builtin()
	var out []check.Result
	for _, want := range m.cfg.Required {
		if ctx.Err() != nil {
			return stamp(nameModules, append(out, interrupted(ctx)))
		}
		out = append(out, m.judge(want, loaded, builtin, loadErr))
	}
	return stamp(nameModules, out)
}

func (m *modules) judge(want string, loaded, builtin map[string]bool, loadErr error) check.Result {
	n := modName(want)
	switch {
	case !validModName(n):
		return errorf(want, "bad module name %q in config", want)
	case loaded[n]:
		return okf(want, "loaded")
	case m.sysModule(n, "initstate"):
		// Only loadable modules have initstate; we get here when
		// /proc/modules could not be read.
		return okf(want, "loaded")
	case builtin[n] || m.sysModule(n, ""):
		// Built-ins show in /sys/module when they have parameters.
		return okf(want, "built into the kernel")
	case loadErr != nil:
		// Without /proc/modules we cannot tell "not loaded" from "not
		// listed"; that is a failure to check, not a node fault.
		return errorf(want, "cannot tell if loaded: %v", loadErr)
	default:
		return failf(want, "not loaded")
	}
}

// modName folds a module name the way the kernel does: "nvidia-uvm" and
// "nvidia_uvm" are the same module, and /proc/modules uses underscores.
func modName(s string) string {
	return strings.ReplaceAll(strings.TrimSpace(s), "-", "_")
}

func (m *modules) loaded() (map[string]bool, error) {
	b, err := sysread.File(at(m.root, "proc/modules"), maxProc)
	if err != nil {
		return nil, err
	}
	names, err := parseProcModules(string(b))
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", at(m.root, "proc/modules"), err)
	}
	return names, nil
}

// parseProcModules reads /proc/modules lines such as
// "nvidia 56700928 3 nvidia_uvm,nvidia_modeset, Live 0x0000000000000000 (POE)".
// Only the name matters; a line without a sane name means the file is not
// what we think it is, so the whole parse fails rather than guessing.
func parseProcModules(s string) (map[string]bool, error) {
	names := map[string]bool{}
	for i, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 3 || !validModName(f[0]) {
			return nil, fmt.Errorf("line %d: not a module line: %s", i+1, sysread.QuoteShort(line))
		}
		names[modName(f[0])] = true
	}
	return names, nil
}

func validModName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// sysModule says whether /sys/module/<name>[/<file>] exists.
func (m *modules) sysModule(name, file string) bool {
	_, err := os.Stat(at(m.root, "sys/module", name, file))
	return err == nil
}

// builtin reads lib/modules/<release>/modules.builtin, the list of modules
// compiled into the kernel. /sys/module shows only built-ins that have
// parameters, so this catches the rest. Best effort: it can only turn a
// FAIL into an OK, so a missing list is no error.
func (m *modules) builtin() map[string]bool {
	rel, err := sysread.Attr(at(m.root, "proc/sys/kernel/osrelease"))
	if err != nil || rel == "" || strings.ContainsAny(rel, "/\x00") {
		return nil
	}
	b, err := sysread.File(at(m.root, "lib/modules", rel, "modules.builtin"), maxProc)
	if err != nil {
		return nil
	}
	names := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if base, ok := strings.CutSuffix(path.Base(strings.TrimSpace(line)), ".ko"); ok {
			names[modName(base)] = true
		}
	}
	return names
}
