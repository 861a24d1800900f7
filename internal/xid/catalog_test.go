package xid

import (
	"crypto/sha256"
	"fmt"
	"testing"

	"github.com/gpuhc/gpuhc/internal/check"
	"github.com/gpuhc/gpuhc/internal/config"
)

// goldenImmediate is NVIDIA's immediate action for every code of the
// catalogue (catalog.go names the source and version), written out again
// here so that an edit to a row must be made twice.
var goldenImmediate = map[int]Bucket{
	1: "CONTACT_SUPPORT", 2: "CONTACT_SUPPORT", 3: "CONTACT_SUPPORT", 4: "CONTACT_SUPPORT", 5: "CONTACT_SUPPORT", 6: "CONTACT_SUPPORT",
	7: "CONTACT_SUPPORT", 8: "RESTART_APP", 9: "CONTACT_SUPPORT", 10: "CONTACT_SUPPORT", 11: "RESTART_APP", 12: "CONTACT_SUPPORT",
	13: "RESTART_APP", 14: "IGNORE", 15: "CONTACT_SUPPORT", 16: "CONTACT_SUPPORT", 17: "CONTACT_SUPPORT", 18: "CONTACT_SUPPORT",
	19: "CONTACT_SUPPORT", 20: "CONTACT_SUPPORT", 21: "CONTACT_SUPPORT", 22: "CONTACT_SUPPORT", 23: "CONTACT_SUPPORT", 24: "CONTACT_SUPPORT",
	25: "RESTART_APP", 26: "CONTACT_SUPPORT", 27: "CONTACT_SUPPORT", 28: "CONTACT_SUPPORT", 29: "CONTACT_SUPPORT", 30: "CONTACT_SUPPORT",
	31: "RESTART_APP", 32: "RESTART_APP", 33: "CONTACT_SUPPORT", 34: "CONTACT_SUPPORT", 35: "CONTACT_SUPPORT", 36: "CONTACT_SUPPORT",
	37: "IGNORE", 38: "IGNORE", 39: "RESTART_APP", 40: "RESTART_APP", 41: "RESTART_APP", 42: "CONTACT_SUPPORT",
	43: "IGNORE", 44: "IGNORE", 45: "WORKFLOW_XID_45", 46: "RESET_GPU", 47: "CONTACT_SUPPORT", 48: "WORKFLOW_XID_48",
	49: "CONTACT_SUPPORT", 50: "CONTACT_SUPPORT", 51: "CONTACT_SUPPORT", 52: "CONTACT_SUPPORT", 53: "CONTACT_SUPPORT", 54: "CHECK_MECHANICALS",
	55: "CONTACT_SUPPORT", 56: "CONTACT_SUPPORT", 57: "CONTACT_SUPPORT", 58: "CONTACT_SUPPORT", 59: "CONTACT_SUPPORT", 60: "RESTART_APP",
	61: "CONTACT_SUPPORT", 62: "RESET_GPU", 63: "IGNORE", 64: "RESET_GPU", 65: "CONTACT_SUPPORT", 66: "IGNORE",
	67: "IGNORE", 68: "RESTART_APP", 69: "RESTART_APP", 70: "RESTART_APP", 71: "RESTART_APP", 72: "RESTART_APP",
	73: "CONTACT_SUPPORT", 74: "WORKFLOW_NVLINK_ERR", 75: "RESTART_APP", 76: "RESTART_APP", 77: "RESTART_APP", 78: "UPDATE_SWFW",
	79: "RESTART_BM", 80: "RESTART_APP", 81: "CONTACT_SUPPORT", 82: "RESTART_APP", 83: "RESTART_APP", 84: "RESTART_APP",
	85: "RESTART_APP", 86: "RESTART_APP", 87: "CONTACT_SUPPORT", 88: "RESTART_APP", 89: "RESTART_APP", 90: "CONTACT_SUPPORT",
	91: "CONTACT_SUPPORT", 92: "IGNORE", 93: "IGNORE", 94: "RESTART_APP", 95: "RESET_GPU", 96: "RESTART_APP",
	97: "RESTART_APP", 98: "RESTART_APP", 99: "RESTART_APP", 100: "RESTART_APP", 101: "RESTART_APP", 102: "RESTART_APP",
	103: "RESTART_APP", 104: "RESTART_APP", 105: "RESTART_APP", 106: "IGNORE", 107: "IGNORE", 108: "IGNORE",
	109: "RESET_GPU", 110: "RESET_GPU", 111: "CONTACT_SUPPORT", 112: "CONTACT_SUPPORT", 113: "CONTACT_SUPPORT", 114: "CONTACT_SUPPORT",
	115: "CONTACT_SUPPORT", 116: "CONTACT_SUPPORT", 117: "CONTACT_SUPPORT", 118: "CONTACT_SUPPORT", 119: "RESET_GPU", 120: "RESET_GPU",
	121: "IGNORE", 122: "CONTACT_SUPPORT", 123: "CONTACT_SUPPORT", 124: "CONTACT_SUPPORT", 125: "CONTACT_SUPPORT", 126: "RESTART_APP",
	127: "RESTART_APP", 128: "RESTART_APP", 129: "RESTART_APP", 130: "RESTART_APP", 131: "RESTART_APP", 132: "RESTART_APP",
	133: "RESTART_APP", 134: "RESTART_APP", 135: "RESTART_APP", 136: "RESET_GPU", 137: "IGNORE", 138: "CONTACT_SUPPORT",
	139: "RESTART_APP", 140: "RESET_GPU", 141: "IGNORE", 142: "CONTACT_SUPPORT", 143: "RESET_GPU", 144: "WORKFLOW_NVLINK5_ERR",
	145: "WORKFLOW_NVLINK5_ERR", 146: "WORKFLOW_NVLINK5_ERR", 147: "WORKFLOW_NVLINK5_ERR", 148: "WORKFLOW_NVLINK5_ERR", 149: "WORKFLOW_NVLINK5_ERR", 150: "WORKFLOW_NVLINK5_ERR",
	151: "RESTART_VM", 152: "IGNORE", 153: "IGNORE", 154: "XID_154", 155: "RESET_GPU", 156: "RESET_GPU",
	157: "IGNORE", 158: "RESET_GPU", 159: "CHECK_UVM", 160: "IGNORE", 161: "IGNORE", 162: "",
	163: "", 164: "", 165: "", 166: "", 167: "", 168: "",
	169: "", 170: "", 171: "", 172: "",
}

// Digests of the rows as the mirror has them (code|mnemonic|description|
// immediate|investigatory per line, line breaks in a cell as spaces; the
// decode table's code|unit|pattern v1|pattern v2|status|action|severity|
// action 2), computed from leptonai/gpud's catalog_generated.go, not from
// gpuhc: any change to any cell fails.
const (
	catalogDigest = "88d1d37bf8bcdfb9e2f0287e368d56bd62094a63cd798a6aacfa9da22421f48c"
	nvlink5Digest = "2a0c29504ae004ed23601cf42d1c7ab76b5554dd635b4b1eaac7f105aabeea27"
)

func TestCatalogRowsPinned(t *testing.T) {
	if len(catalog) != len(goldenImmediate) {
		t.Errorf("catalogue has %d rows, golden list %d", len(catalog), len(goldenImmediate))
	}
	h := sha256.New()
	for i, e := range catalog {
		if e.Code != i+1 {
			t.Fatalf("row %d is code %d: the catalogue is indexed by code", i, e.Code)
		}
		if want, ok := goldenImmediate[e.Code]; !ok || e.Immediate != want {
			t.Errorf("XID %d immediate action %q, golden %q", e.Code, e.Immediate, want)
		}
		fmt.Fprintf(h, "%d|%s|%s|%s|%s\n", e.Code, e.Mnemonic, e.Description, e.Immediate, e.Investigatory)
	}
	if got := fmt.Sprintf("%x", h.Sum(nil)); got != catalogDigest {
		t.Errorf("catalogue rows digest %s, want %s: a row changed", got, catalogDigest)
	}
	h = sha256.New()
	for _, r := range nvlink5Rules {
		fmt.Fprintf(h, "%d|%s|%s|%s|0x%08x|%s|%s|%s\n", r.xid, r.unit, r.infoV1, r.infoV2, r.status, r.immediate, r.severity, r.secondStep)
	}
	if got := fmt.Sprintf("%x", h.Sum(nil)); got != nvlink5Digest || len(nvlink5Rules) != 94 {
		t.Errorf("NVLink5 decode table digest %s (%d rows), want %s (94): a row changed", got, len(nvlink5Rules), nvlink5Digest)
	}
}

// Every bucket of the catalogue has a verdict: a new bucket in a newer
// catalogue must be mapped before it can be used.
func TestEveryBucketJudged(t *testing.T) {
	workflows := map[Bucket]bool{WorkflowXID45: true, WorkflowXID48: true, WorkflowNVLinkErr: true, WorkflowNVLink5Err: true, WorkflowXID154: true}
	for _, e := range catalog {
		if _, ok := bucketVerdicts[e.Immediate]; !ok && !workflows[e.Immediate] {
			t.Errorf("XID %d: bucket %q has no verdict", e.Code, e.Immediate)
		}
	}
	for _, r := range nvlink5Rules {
		if r.immediate != IgnoreBucket && r.immediate != ResetGPU && r.immediate != XID154Eval {
			t.Errorf("NVLink5 row %d %s: action %q not decoded", r.xid, r.unit, r.immediate)
		}
	}
}

// gpuhc's mapping (docs/architecture.md#xid-classification), bucket by
// bucket, on a code of each (by code alone: no line to decode).
func TestBucketVerdicts(t *testing.T) {
	tab := NewTable(config.Default().Checks.GPU.XID)
	for _, tc := range []struct {
		xid    int
		bucket Bucket
		status check.Status
		action check.Action
	}{
		{79, RestartBM, check.Fail, check.ActionReboot},
		{46, ResetGPU, check.Fail, check.ActionResetGPU},
		{110, ResetGPU, check.Fail, check.ActionResetGPU},
		{136, ResetGPU, check.Fail, check.ActionResetGPU},
		{143, ResetGPU, check.Fail, check.ActionResetGPU},
		{155, ResetGPU, check.Fail, check.ActionResetGPU},
		{156, ResetGPU, check.Fail, check.ActionResetGPU},
		{158, ResetGPU, check.Fail, check.ActionResetGPU},
		{13, RestartApp, check.Warn, check.ActionNone},
		{94, RestartApp, check.Warn, check.ActionNone},
		{63, IgnoreBucket, check.OK, check.ActionNone},
		{92, IgnoreBucket, check.OK, check.ActionNone},
		{142, ContactSupport, check.Fail, check.ActionDrain},
		{54, CheckMechanicals, check.Fail, check.ActionDrain},
		{78, UpdateSWFW, check.Warn, check.ActionNone},
		{151, RestartVM, check.Warn, check.ActionNone},
		{159, CheckUVM, check.Warn, check.ActionNone},
		{167, NotListed, check.Warn, check.ActionNone},
	} {
		e, _ := Lookup(tc.xid)
		if e.Immediate != tc.bucket {
			t.Errorf("XID %d bucket %q, want %q", tc.xid, e.Immediate, tc.bucket)
		}
		v := tab.Judge(Event{XID: tc.xid}, nil)
		if v.Status != tc.status || v.Action != tc.action {
			t.Errorf("XID %d (%s): %s %s, want %s %s", tc.xid, tc.bucket, v.Status, v.Action, tc.status, tc.action)
		}
	}
	if v := tab.Judge(Event{XID: 300}, nil); v.Status != check.Warn || v.Message != "XID 300 unlisted XID (not in NVIDIA's catalogue)" {
		t.Errorf("unlisted XID: %+v", v)
	}
}
