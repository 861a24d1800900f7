package sxid

// Class is how NVIDIA's Fabric Manager User Guide files an SXid.
type Class int

const (
	// NonFatal: "Non-Fatal NVSwitch SXid Errors" (D.4).
	NonFatal Class = iota + 1
	// Fatal: "Fatal NVSwitch SXid Errors" (D.5): fatal to the traffic of
	// the port (access or trunk); the GPUs and NVSwitches behind it must
	// be reset.
	Fatal
	// AlwaysFatal: "Always Fatal NVSwitch SXid Errors" (D.6): fatal to the
	// whole fabric; the host must be restarted or every GPU and NVSwitch
	// reset.
	AlwaysFatal
	// Notable: "Other Notable NVSwitch SXid Errors" (D.7) and codes the
	// guide names without a class; the line's own "Fatal"/"Non-fatal"
	// decides, as for an unlisted code.
	Notable
)

// Code is one row of the SXid table.
type Code struct {
	Code  int
	Name  string // the guide's name for it
	Class Class
	Means string // what it does to the fabric, in the guide's words, short
}

// Source of the table: NVIDIA Fabric Manager User Guide, DU-09883-001
// v1.3 (October 2023), appendix D "NVSwitch SXid Errors"
// (https://docs.nvidia.com/datacenter/tesla/pdf/fabric-manager-user-guide.pdf),
// as mirrored, row for row with the section each code is in, by
// leptonai/gpud components/accelerator/nvidia/sxid/sxid.go (commit
// 4a8de33a3f02e207f39e9023d67125592d599731, August 2026). Data only; a
// test pins every row.
const Source = "NVIDIA Fabric Manager User Guide DU-09883-001 v1.3 (Oct 2023), appendix D"

const (
	sbe       = "single-bit ECC error, corrected by the switch; no impact"
	portFatal = "fatal to the port's NVLink traffic; the GPUs and NVSwitches must be reset"
	always    = "always fatal to the whole fabric; restart the host or reset every GPU and NVSwitch"
)

// Table is every SXid the guide lists.
var Table = []Code{
	// D.4 Non-Fatal NVSwitch SXid Errors.
	{11004, "ingress invalid ACL", NonFatal, "a fabric partition misconfiguration; the port's traffic stalls (CUDA jobs abort with Xid 45)"},
	{11012, "single bit ECC errors", NonFatal, sbe},
	{11021, "single bit ECC errors", NonFatal, sbe},
	{11022, "single bit ECC errors", NonFatal, sbe},
	{11023, "single bit ECC errors", NonFatal, sbe},
	{12021, "single bit ECC errors", NonFatal, sbe},
	{12023, "single bit ECC errors", NonFatal, sbe},
	{15008, "single bit ECC errors", NonFatal, sbe},
	{15011, "single bit ECC errors", NonFatal, sbe},
	{19049, "single bit ECC errors", NonFatal, sbe},
	{19055, "single bit ECC errors", NonFatal, sbe},
	{19057, "single bit ECC errors", NonFatal, sbe},
	{19059, "single bit ECC errors", NonFatal, sbe},
	{19062, "single bit ECC errors", NonFatal, sbe},
	{19065, "single bit ECC errors", NonFatal, sbe},
	{19068, "single bit ECC errors", NonFatal, sbe},
	{19071, "single bit ECC errors", NonFatal, sbe},
	{24001, "single bit ECC errors", NonFatal, sbe},
	{24002, "single bit ECC errors", NonFatal, sbe},
	{24003, "single bit ECC errors", NonFatal, sbe},
	{20001, "TX replay error", NonFatal, "the link replayed packets; no impact unless it repeats"},
	{12028, "egress non-posted PRIV error", NonFatal, "the port's NVLink traffic stalls and GPU access may hang (CUDA jobs abort with Xid 45)"},
	{19084, "AN1 heartbeat timeout error", NonFatal, "a link heartbeat timed out"},
	{22013, "Minion link DLREQ interrupt", NonFatal, "a link power-state request; no impact"},
	{20012, "broken/inconsistent connection", NonFatal, "the link's connection is not what the fabric expects"},

	// D.5 Fatal NVSwitch SXid Errors.
	{11001, "ingress invalid command", Fatal, portFatal},
	{11009, "ingress invalid VCSet", Fatal, portFatal},
	{11013, "ingress header DBE", Fatal, portFatal},
	{11018, "ingress RID DBE", Fatal, portFatal},
	{11019, "ingress RLAN DBE", Fatal, portFatal},
	{11020, "ingress control parity", Fatal, portFatal},
	{12001, "egress crossbar overflow", Fatal, portFatal},
	{12002, "egress packet route", Fatal, portFatal},
	{12022, "egress input ECC DBE error", Fatal, portFatal},
	{12024, "egress output ECC DBE error", Fatal, portFatal},
	{12025, "egress credit overflow", Fatal, portFatal},
	{12026, "egress destination request ID error", Fatal, portFatal},
	{12027, "egress destination response ID error", Fatal, portFatal},
	{12030, "egress control parity error", Fatal, portFatal},
	{12031, "egress credit parity error", Fatal, portFatal},
	{12032, "egress flit type mismatch", Fatal, portFatal},
	{14017, "TS ATO timeout", Fatal, portFatal},
	{15001, "route buffer over/underflow", Fatal, portFatal},
	{15006, "route transdone over/underflow", Fatal, portFatal},
	{15009, "route GLT DBE", Fatal, portFatal},
	{15010, "route parity", Fatal, portFatal},
	{15012, "route incoming DBE", Fatal, portFatal},
	{15013, "route credit parity", Fatal, portFatal},
	{19047, "NCISOC HDR ECC DBE error", Fatal, portFatal},
	{19048, "NCISOC DAT ECC DBE error", Fatal, portFatal},
	{19054, "HDR RAM ECC DBE error", Fatal, portFatal},
	{19056, "DAT0 RAM ECC DBE error", Fatal, portFatal},
	{19058, "DAT1 RAM ECC DBE error", Fatal, portFatal},
	{19060, "CREQ RAM HDR ECC DBE error", Fatal, portFatal},
	{19061, "CREQ RAM DAT ECC DBE error", Fatal, portFatal},
	{19063, "response RAM HDR ECC DBE error", Fatal, portFatal},
	{19064, "response RAM DAT ECC DBE error", Fatal, portFatal},
	{19066, "COM RAM HDR ECC DBE error", Fatal, portFatal},
	{19067, "COM RAM DAT ECC DBE error", Fatal, portFatal},
	{19069, "RSP1 RAM HDR ECC DBE error", Fatal, portFatal},
	{19070, "RSP1 RAM DAT ECC DBE error", Fatal, portFatal},
	{20034, "LTSSM fault up", Fatal, "the link went down from active; " + portFatal},
	// Listed under both D.4 and D.5; taken as fatal, as gpud does.
	{22012, "Minion link NA interrupt", Fatal, portFatal},
	{24004, "sourcetrack TCEN0 crumbstore DBE", Fatal, portFatal},
	{24005, "sourcetrack TCEN0 TD crumbstore DBE", Fatal, portFatal},
	{24006, "sourcetrack TCEN1 crumbstore DBE", Fatal, portFatal},
	{24007, "sourcetrack timeout error", Fatal, portFatal},

	// D.6 Always Fatal NVSwitch SXid Errors.
	{12020, "egress sequence ID error", AlwaysFatal, always},
	{22003, "Minion halt", AlwaysFatal, always},
	{22011, "Minion exterror", AlwaysFatal, always},
	{23001, "ingress SRC-VC buffer overflow", AlwaysFatal, always},
	{23002, "ingress SRC-VC buffer underflow", AlwaysFatal, always},
	{23003, "egress DST-VC credit overflow", AlwaysFatal, always},
	{23004, "egress DST-VC credit underflow", AlwaysFatal, always},
	{23005, "ingress packet burst error", AlwaysFatal, always},
	{23006, "ingress packet sticky error", AlwaysFatal, always},
	{23007, "possible bubbles at ingress", AlwaysFatal, always},
	{23008, "ingress packet invalid dst error", AlwaysFatal, always},
	{23009, "ingress packet parity error", AlwaysFatal, always},
	{23010, "ingress SRC-VC buffer overflow", AlwaysFatal, always},
	{23011, "ingress SRC-VC buffer underflow", AlwaysFatal, always},
	{23012, "egress DST-VC credit overflow", AlwaysFatal, always},
	{23013, "egress DST-VC credit underflow", AlwaysFatal, always},
	{23014, "ingress packet burst error", AlwaysFatal, always},
	{23015, "ingress packet sticky error", AlwaysFatal, always},
	{23016, "possible bubbles at ingress", AlwaysFatal, always},
	{23017, "ingress credit parity error", AlwaysFatal, always},

	// D.7 Other Notable NVSwitch SXid Errors, and 20009, which the guide
	// names without a section.
	{10001, "host PRIV error", Notable, "an error accessing the switch's registers"},
	{10002, "host PRIV timeout", Notable, "a timeout accessing the switch's registers"},
	{10003, "host unhandled interrupt", Notable, "an interrupt the driver does not handle"},
	{10004, "host thermal event start", Notable, "the switch started thermal throttling"},
	{10005, "host thermal event end", Notable, "the switch stopped thermal throttling"},
	{20009, "RX short error rate", Notable, "the link's receive error rate rose"},
}

// Lookup finds code's row.
func Lookup(code int) (Code, bool) {
	for _, c := range Table {
		if c.Code == code {
			return c, true
		}
	}
	return Code{}, false
}
