package slurm

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// What slurmrestd and scontrol answer decides whether gpuhc may resume a
// node, so whatever they answer must be read right or refused: these
// targets take the recorded answers of three Slurm releases as seeds.

// addRecorded seeds f with the recorded answers named name (a glob) of
// one API version per release.
func addRecorded(f *testing.F, dir, name string) {
	for _, release := range []string{"slurm-22.05/v0.0.38", "slurm-24.11/v0.0.41", "slurm-26.05/v0.0.45", "slurm-24.11", "slurm-26.05"} {
		paths, _ := filepath.Glob(filepath.Join("testdata", dir, release, name))
		for _, p := range paths {
			if b, err := os.ReadFile(p); err == nil && len(b) <= 64<<10 {
				f.Add(b)
			}
		}
	}
}

// validNode is a node as every parser must hand it on: a name, and one
// base state first, then flags.
func validNode(n Node) bool {
	if n.Name == "" || len(n.State) == 0 || !baseStates[n.State[0]] || strings.Contains(n.Reason, "\n") {
		return false
	}
	for _, s := range n.State[1:] {
		if baseStates[s] || !stateWord(s) {
			return false
		}
	}
	return n.ReasonTime.IsZero() || n.ReasonTime.Unix() > 0
}

// checkList: a node list has valid, distinct nodes, and reading one node
// from the same answer gives the same node.
func checkList(t *testing.T, in []byte, nodes []Node, one func(name string) (Node, error)) {
	seen := map[string]bool{}
	for _, n := range nodes {
		if !validNode(n) || seen[n.Name] {
			t.Fatalf("%q: node %+v", in, n)
		}
		seen[n.Name] = true
		if got, err := one(n.Name); err == nil && !reflect.DeepEqual(got, n) {
			t.Fatalf("%q: list has %+v, the node alone %+v", in, n, got)
		}
	}
}

func FuzzParseShowNodes(f *testing.F) {
	addRecorded(f, "scontrol", "show_node*.txt")
	f.Add([]byte("NodeName=a State=IDLE+DRAIN Reason=x [u@2025-01-02T03:04:05]\nsecond line\nNodeName=b State=down*"))
	f.Add([]byte("NodeName=a State=IDLE State=DOWN\nNodeName=a State=MIXED"))
	f.Fuzz(func(t *testing.T, out []byte) {
		if nodes, err := parseShowNodes(out, time.UTC); err == nil {
			checkList(t, out, nodes, func(name string) (Node, error) { return parseShowNode(out, name, time.UTC) })
		}
		if n, err := parseShowNode(out, "gpu001", time.UTC); err == nil {
			if nodes, err := parseShowNodes(out, time.UTC); err != nil || !reflect.DeepEqual(nodes, []Node{n}) {
				t.Fatalf("%q: show node gives %+v, show nodes %+v, %v", out, n, nodes, err)
			}
		}
	})
}

// ambiguous is a reason that itself holds scontrol's " [user@time]"
// suffix: where it ends the text (or a key follows) it cannot be told
// from the real one.
var ambiguous = regexp.MustCompile(` \[[^\s\[\]@]+@\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\]`)

// A reason gpuhc may send (checkReason) comes back from scontrol as it
// was sent: ownership depends on it.
func FuzzScontrolReason(f *testing.F) {
	line, _ := os.ReadFile("testdata/scontrol/slurm-24.11/show_node_drained.txt")
	head, _, _ := strings.Cut(string(line), " Reason=")
	for _, s := range []string{"gpuhc: host.mounts: /scratch: not mounted", "x Comment=y", "[a@b] Reason=c", "a  ", " a", "ünïcode", "x [u@2025-01-02T03:04:05]y"} {
		f.Add(s, "slurm", " Comment=c")
	}
	when := time.Date(2026, 11, 30, 5, 54, 42, 0, time.UTC)
	user := regexp.MustCompile(`^[^\s\[\]@]+$`)
	f.Fuzz(func(t *testing.T, reason, by, tail string) {
		if checkReason(reason) != nil || !user.MatchString(by) || ambiguous.MatchString(reason) {
			return
		}
		if tail != " Comment=c" {
			tail = ""
		}
		out := head + " Reason=" + reason + " [" + by + "@" + when.Format(scontrolTime) + "]" + tail + "\n"
		n, err := parseShowNode([]byte(out), "gpu001", time.UTC)
		if err != nil || n.Reason != reason || n.ReasonUser != by || !n.ReasonTime.Equal(when) {
			t.Fatalf("reason %q by %q: read back %q by %q at %v, %v", reason, by, n.Reason, n.ReasonUser, n.ReasonTime, err)
		}
	})
}

func FuzzRESTNodes(f *testing.F) {
	addRecorded(f, "rest", "node*.json")
	f.Add([]byte(`{"nodes":[{"name":"a","state":"idle+drain","reason":"r","reason_changed_at":{"set":true,"infinite":false,"number":-1}}]}`))
	f.Add([]byte(`{"nodes":[{"name":"a","state":["IDLE"],"state_flags":["DRAIN"]},{"name":"a","state":"down"}],"errors":[{"errno":5}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if nodes, err := allNodes(body); err == nil {
			checkList(t, body, nodes, func(name string) (Node, error) { return pickNode(body, name) })
		}
		if n, err := pickNode(body, "gpu001"); err == nil && (n.Name != "gpu001" || !validNode(n)) {
			t.Fatalf("%q: picked %+v", body, n)
		}
		var env restResponse
		if json.Unmarshal(body, &env) == nil && len(env.Errors) > 0 {
			ae := &APIError{Method: "GET", Path: "/x", Status: 500, Errors: env.Errors}
			_, _ = ae.Error(), ae.Temporary()
		}
	})
}

// A ping answer is up only if it says so, and refused only if slurmctld
// said the token was refused.
func FuzzCheckPings(f *testing.F) {
	addRecorded(f, "rest", "*ping*.json")
	f.Add([]byte(`{"pings":[{"hostname":"a","ping":"UP","pinged":"down"},{"hostname":"b","responding":false,"status":"Protocol authentication error"}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		err := checkPings(body)
		if err == nil && !json.Valid(body) || errors.Is(err, ErrUnauthorized) && !strings.Contains(err.Error(), authText) {
			t.Fatalf("checkPings(%q) = %v", body, err)
		}
	})
}

// Discovery picks versions the cache can keep and slurmrestd serves: a
// node path of the document, with a GET to read and a POST to write.
func FuzzPickVersions(f *testing.F) {
	for _, release := range []string{"slurm-22.05", "slurm-24.11", "slurm-26.05"} {
		// The node paths of the recorded documents (the whole is up to
		// 887 KB: too much for a seed).
		var spec openAPI
		if b, err := os.ReadFile(filepath.Join("testdata/rest", release, "openapi.200.json")); err == nil && json.Unmarshal(b, &spec) == nil {
			for p := range spec.Paths {
				if !strings.Contains(p, "/node") {
					delete(spec.Paths, p)
				}
			}
			small, _ := json.Marshal(spec)
			f.Add(small)
		}
	}
	f.Add([]byte(`{"paths":{"/slurm/v0.0.040/node/{n}":{"get":{}},"/slurm/v0.0.1000/node/{n}":{"post":{}}}}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		v, err := pickVersions(doc)
		if err != nil {
			return
		}
		w, werr := strconv.Atoi(strings.TrimPrefix(v.write, "v0.0."))
		if !(versionRecord{Read: v.read, Write: v.write, At: time.Now()}).sound() || v.write != "" && (werr != nil || w < minNodePost) {
			t.Fatalf("pickVersions(%q) = %+v: not a version to cache", doc, v)
		}
		var spec openAPI
		_ = json.Unmarshal(doc, &spec)
		for _, want := range [][2]string{{v.read, "get"}, {v.write, "post"}} {
			if want[0] != "" && !servedAt(spec, want[0], want[1]) {
				t.Fatalf("pickVersions(%q) = %+v: the document has no %s on a %s node path", doc, v, want[1], want[0])
			}
		}
	})
}

func servedAt(spec openAPI, version, method string) bool {
	for p, ops := range spec.Paths {
		if _, ok := ops[method]; ok && strings.HasPrefix(p, "/slurm/"+version+"/node/{") {
			return true
		}
	}
	return false
}

// A token is one header-safe word from the file, and an error never
// quotes the file (it holds a root-equivalent secret).
func FuzzParseToken(f *testing.F) {
	for _, s := range []string{"eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJleHAiOjF9.c2ln\n", "SLURM_JWT=abc\n", "export SLURM_JWT=abc", "# c\n\nabc\n",
		"a\nb\n", "SLURM_JWT=", "abc def0123456789abcdef0123", "\x00", "SLURM_JWT=secretsecretsecretsecret\x7f"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tok, err := parseToken(data)
		if err == nil {
			if tok == "" || strings.ContainsFunc(tok, func(r rune) bool { return r <= ' ' || r == 0x7f }) || !bytes.Contains(data, []byte(tok)) {
				t.Fatalf("parseToken(%q) = %q", data, tok)
			}
			return
		}
		for _, w := range strings.FieldsFunc(string(data), func(r rune) bool { return r <= ' ' || r == '=' }) {
			if len(w) >= 20 && strings.Contains(err.Error(), w) {
				t.Fatalf("parseToken(%q): error %q quotes the file", data, err)
			}
		}
	})
}
