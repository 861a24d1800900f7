package ib

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/gpuhc/gpuhc/internal/sysread"
)

// NVLink5 HGX boards (B200, B300) have no NVSwitch on the PCI bus: the
// switches are managed through ConnectX functions on the baseboard, which
// Fabric Manager and the NVLink subnet manager (nvlsm) drive over their
// InfiniBand ports. They are mlx5 devices like the node's HCAs, with the
// same PCI ids; what tells them apart is their PCI Vital Product Data,
// whose read-only section carries the text SMDL=SW_MNG (as `lspci -vv`
// shows it). Sources: NVIDIA's Fabric Manager user guide ("Systems Using
// Fourth Generation NVSwitches"), and what deployments key on, e.g.
// bottlerocket-os/bottlerocket-core-kit#499 (reads
// /sys/class/infiniband/<dev>/device/vpd for SW_MNG) and
// siderolabs/extensions#893 (an HGX B200 whose mlx5_8..mlx5_11 are such
// "NVSwitch LPF" devices).
const swMngMarker = "SMDL=SW_MNG"

// maxVPD caps the VPD read: PCI VPD addresses are 15 bits, so no VPD is
// larger than 32 KiB. The read stops at the end tag, long before that on
// every real card (a few hundred bytes).
const maxVPD = 32 << 10

// PCI VPD resource tags (PCI Local Bus Specification 3.0, section 6.4 and
// appendix I). A large resource has bit 7 set and a 16-bit little-endian
// length; a small one holds its length in bits 2:0.
const (
	vpdTagID  = 0x82 // identifier string (large)
	vpdTagRO  = 0x90 // VPD-R, read-only keywords (large)
	vpdTagRW  = 0x91 // VPD-W, read/write keywords (large)
	vpdTagEnd = 0x78 // end (small, name 0xf, length 0)
)

// switchMgmt reads the VPD of the PCI function addr under root and says
// whether it marks an NVSwitch management device. A function without a
// vpd file (most VFs, soft devices, older kernels) is not one.
func switchMgmt(root, addr string) (bool, error) {
	p := filepath.Join(root, "sys/bus/pci/devices", addr, "vpd")
	// Non-blocking and not through a link: sysfs never makes vpd a link,
	// and a fixture or a hostile tree must not point it at a FIFO.
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("open %s: %w", p, sysread.Bare(err))
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return false, fmt.Errorf("%s: not a regular file", p)
	}
	found, err := scanVPD(io.LimitReader(f, maxVPD))
	if err != nil {
		return false, fmt.Errorf("read %s: %w", p, err)
	}
	return found, nil
}

// scanVPD walks the VPD resources up to the end tag and reports whether a
// keyword of VPD-R or VPD-W holds the SW_MNG marker. It reads only as far
// as it has to: each byte of VPD is a slow config-space transaction.
//
// A VPD that breaks the format (vendors get it wrong; the kernel's ABI
// says to expect that) is read on to the cap and searched as raw bytes,
// so that a management device with a sloppy VPD is still kept out of
// the HCAs.
func scanVPD(r io.Reader) (bool, error) {
	var seen bytes.Buffer
	tr := io.TeeReader(r, &seen)
	found, err := walkVPD(tr)
	if err == nil || found {
		return found, nil
	}
	if errors.Is(err, errVPDFormat) {
		_, err = io.Copy(io.Discard, tr)
	}
	if bytes.Contains(seen.Bytes(), []byte(swMngMarker)) {
		return true, nil
	}
	if err != nil {
		return false, sysread.Bare(err)
	}
	return false, nil
}

var errVPDFormat = errors.New("not PCI VPD")

func walkVPD(r io.Reader) (bool, error) {
	var tag [1]byte
	for {
		if _, err := io.ReadFull(r, tag[:]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return false, errVPDFormat // ended without an end tag
			}
			return false, err
		}
		t := tag[0]
		if t&0x80 == 0 { // small resource
			if t&0x78 == vpdTagEnd {
				return false, nil
			}
			if _, err := io.CopyN(io.Discard, r, int64(t&0x07)); err != nil {
				return false, errVPDFormat
			}
			continue
		}
		var l [2]byte
		if _, err := io.ReadFull(r, l[:]); err != nil {
			return false, errVPDFormat
		}
		body := make([]byte, binary.LittleEndian.Uint16(l[:]))
		if _, err := io.ReadFull(r, body); err != nil {
			return false, errVPDFormat
		}
		switch t {
		case vpdTagRO, vpdTagRW:
			ok, err := keywordsHold(body, swMngMarker)
			if err != nil || ok {
				return ok, err
			}
		case vpdTagID:
		default:
			return false, errVPDFormat
		}
	}
}

// keywordsHold walks one VPD-R or VPD-W body, keywords of two ASCII
// characters, a length byte and the value, and reports whether a value
// holds marker.
func keywordsHold(body []byte, marker string) (bool, error) {
	for len(body) > 0 {
		if len(body) < 3 {
			return false, errVPDFormat
		}
		n := int(body[2])
		if len(body) < 3+n {
			return false, errVPDFormat
		}
		if bytes.Contains(body[3:3+n], []byte(marker)) {
			return true, nil
		}
		body = body[3+n:]
	}
	return false, nil
}
