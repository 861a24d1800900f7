package sysfsfix

import "slices"

// PCI Vital Product Data as the kernel's vpd file returns it (PCI Local
// Bus Specification 3.0, section 6.4 and appendix I): an identifier
// string (large resource 0x82), the read-only keywords (VPD-R, 0x90)
// ending in RV, whose first byte makes every byte from the start through
// it sum to zero, the read/write keywords (VPD-W, 0x91) and the end tag
// (0x78). The layout follows the VPD tables in NVIDIA's (Mellanox's)
// ConnectX adapter user manuals: ID string; PN, EC, SN, V0, RV; then V1,
// YA, RW.
//
// The values are SYNTHETIC: no public capture of an SW_MNG function's VPD
// was found. Where SMDL=SW_MNG sits is taken from what `lspci -vv` shows
// of it (a keyword value holding the text; see internal/ib/vpd.go).

type vpdKeyword struct{ key, value string }

func vpdLarge(tag byte, body []byte) []byte {
	return append([]byte{tag, byte(len(body)), byte(len(body) >> 8)}, body...)
}

func vpdKeywords(kws []vpdKeyword) []byte {
	var out []byte
	for _, k := range kws {
		out = append(out, k.key[0], k.key[1], byte(len(k.value)))
		out = append(out, k.value...)
	}
	return out
}

// vpd lays out one VPD. rw is the writable section's keywords before RW,
// which pads it to rwLen bytes of data.
func vpd(id string, ro, rw []vpdKeyword, rwPad int) string {
	out := vpdLarge(0x82, []byte(id))
	body := vpdKeywords(ro)
	// RV: checksum byte, then reserved zeros (none here).
	body = append(body, 'R', 'V', 1, 0)
	out = append(out, vpdLarge(0x90, body)...)
	var sum byte
	for _, c := range out {
		sum += c
	}
	out[len(out)-1] = -sum
	w := vpdKeywords(rw)
	w = append(w, 'R', 'W', byte(rwPad))
	w = append(w, make([]byte, rwPad)...)
	out = append(out, vpdLarge(0x91, w)...)
	return string(append(out, 0x78))
}

var vpdRW = []vpdKeyword{{"V1", "N/A   "}, {"YA", "N/A                             "}}

// vpdHCA is a ConnectX-7 NDR adapter's VPD (MCX75310AAS-NEAT, the
// single-port OSFP NDR card of DGX/HGX H100 and B200 nodes).
func vpdHCA(serial string) string {
	return vpd("NVIDIA ConnectX-7 HHHL Adapter Card, 400GbE / NDR IB (default mode), Single-port OSFP, PCIe 5.0 x16",
		[]vpdKeyword{{"PN", "MCX75310AAS-NEAT     "}, {"EC", "A7"}, {"SN", serial}, {"V0", "PCIeGen5 x16    "},
			{"V2", "MCX75310AAS-NEAT     "}, {"V3", "a1f4e2b6c3d7e8f90a1b2c3d4e5f6a7b"},
			{"VA", "MLX:MN=MLNX:CSKU=V2:UUID=V3:PCI=V0:MODL=CX75310A"}},
		slices.Clone(vpdRW), 64)
}

// vpdSwitchMgmt is an NVSwitch management function's VPD: the marker
// SMDL=SW_MNG in its vendor-specific keyword.
func vpdSwitchMgmt(serial string) string {
	return vpd("NVIDIA ConnectX-7 NVLink Switch Management",
		[]vpdKeyword{{"PN", "692-9K36F-00MV-JQ0   "}, {"EC", "A1"}, {"SN", serial}, {"V0", "PCIeGen5 x4     "},
			{"VA", "MLX:MN=MLNX:CSKU=V2:UUID=V3:PCI=V0:MODL=CX7:SMDL=SW_MNG"}},
		slices.Clone(vpdRW), 64)
}
