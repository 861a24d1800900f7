package kmsg

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/gpuhc/gpuhc/internal/lazyre"
)

// A saved kernel log (gpuhc-healthcheck --kernel-log FILE) comes in
// whatever form an admin or a bug report kept it. ParseText reads one
// line of any of these, told apart line by line:
//
//	6,1234,5678,-;text                               /dev/kmsg record (cat /dev/kmsg), " KEY=VALUE" lines after it
//	<6>[  219.470123] text                           dmesg -r
//	kern  :warn  : [  219.470123] text              dmesg -x
//	[  219.470123] text                              dmesg
//	[Tue Mar  5 22:23:56 2024] text                  dmesg -T
//	2024-03-05T22:23:56,123456+00:00 text            dmesg --time-format=iso
//	[  219.470123][  T298] text                      any of these with the caller (CONFIG_PRINTK_CALLER)
//	[  219.470123] host kernel: text                 journalctl -k -o short-monotonic
//	Mar  5 22:23:56 host kernel: [  219.47] text     syslog, journalctl -k (short, short-precise)
//	2024-03-05T22:23:56.123456+00:00 host kernel: text   RFC 3339 syslog, journalctl -o short-iso
//	Mar 27 17:40:36 kernel: text, kernel: text       journal pastes without the host, or with only "kernel:"
//	[  +0.000001] text                               dmesg -H (relative time: not kept)
//	kern  :warn  : 2025-01-21T04:41:44,283302+00:00 text   dmesg -x --time-format iso
//	NVRM: Xid (PCI:0000:3b:00): 79, ...              a bare kernel line, as pasted in bug reports
//
// Syslog lines count only from "kernel:"; another program's line is not
// the kernel's, whatever it says. A level is known only from a /dev/kmsg
// record, dmesg -r or dmesg -x; elsewhere it is -1.

var (
	// "<6>[  219.470123] text" (dmesg -r): the PRI, then dmesg's line.
	rawPrefix = lazyre.New(`^<([0-9]{1,4})>(.*)$`)
	// "kern  :warn  : [  219.470123] text" (dmesg -x).
	decoded = lazyre.New(`^([a-z]+) *:([a-z]+) *: ?(.*)$`)
	// "[  219.470123] text": seconds and microseconds since boot; "[
	// +0.000001]" (dmesg -H) is the time since the line before.
	monotonic = lazyre.New(`^\[ *(\+?)([0-9]+)\.([0-9]{1,9})\] ?(.*)$`)
	// "2025-01-21T04:41:44,283302+00:00 text" (dmesg --time-format iso).
	isoStamp = lazyre.New(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]+)?(?:Z|[+-][0-9]{2}:?[0-9]{2})? (.*)$`)
	// "[Tue Mar  5 22:23:56 2024] text" (dmesg -T).
	wallClock = lazyre.New(`^\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ 0-9][0-9] [0-9]{2}:[0-9]{2}:[0-9]{2} [0-9]{4}\] ?(.*)$`)
	// "Mar  5 22:23:56[.123456] host prog[pid]: text" (BSD syslog,
	// journalctl's short and short-precise).
	// The day may be unpadded ("Dec 1"), and journal pastes may leave the
	// host out ("Mar 27 17:40:36 kernel: text", hostless).
	bsdSyslog = lazyre.New(`^[A-Z][a-z]{2} +[0-9]{1,2} [0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)? +(\S+) ([^\s:\[]+)(?:\[[0-9]+\])?: ?(.*)$`)
	hostless  = lazyre.New(`^(?:[A-Z][a-z]{2} +[0-9]{1,2} [0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)? +)?kernel: ?(.*)$`)
	// "2024-03-05T22:23:56.123456+00:00 host prog[pid]: text" (RFC 3339
	// syslog, journalctl -o short-iso and short-iso-precise).
	isoSyslog = lazyre.New(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]+)?(?:Z|[+-][0-9]{2}:?[0-9]{2})? (\S+) ([^\s:\[]+)(?:\[[0-9]+\])?: ?(.*)$`)
	// "2024-03-05T22:23:56,123456+00:00 text" (dmesg --time-format=iso):
	// a comma before the fraction and no host, unlike RFC 3339 syslog.
	isoDmesg = lazyre.New(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2},[0-9]+(?:Z|[+-][0-9]{2}:?[0-9]{2})? (.*)$`)
	// "[  T298]" or "[  C12]" after the timestamp: the caller, which
	// CONFIG_PRINTK_CALLER kernels print (and record as caller=T298).
	callerID = lazyre.New(`^ ?\[ *([TC][0-9]+)\] ?(.*)$`)
	// "host kernel: text" after journalctl -o short-monotonic's timestamp.
	monoHost = lazyre.New(`^\S+ kernel: (.*)$`)
	// A /dev/kmsg record's header: "PRI,SEQ,TS[,FLAGS...];".
	recordHead = lazyre.New(`^[0-9]{1,5},[0-9]{1,20},[0-9]{1,20}(?:,[^;]*)?;`)
	// A dictionary line after a record: " SUBSYSTEM=pci".
	dictLine = lazyre.New(`^ [A-Z_][A-Z0-9_]*=`)
)

// levels are dmesg -x's level names, by syslog level.
var levels = map[string]int{"emerg": 0, "alert": 1, "crit": 2, "err": 3, "warn": 4, "notice": 5, "info": 6, "debug": 7}

// ParseText reads one line of a saved kernel log (see above) as a record
// with sequence number 0 and Flags "-", or, for a /dev/kmsg record, as
// the record says. ok is false for a line that is not the kernel's (an
// empty line, another program's syslog line).
func ParseText(line string) (r Record, ok bool) {
	line = strings.TrimRight(line, "\r\n")
	if strings.TrimSpace(line) == "" {
		return Record{}, false
	}
	if recordHead.MatchString(line) {
		if r, err := ParseRecord(line); err == nil {
			return r, true
		}
	}
	r = Record{Level: -1, Flags: "-"}
	dmesg := false // dmesg -r or -x: what follows is dmesg's, no syslog
	if m := rawPrefix.FindStringSubmatch(line); m != nil {
		pri, _ := strconv.Atoi(m[1])
		r.Facility, r.Level = pri>>3, pri&7
		line, dmesg = m[2], true
	} else if m := decoded.FindStringSubmatch(line); m != nil {
		if lv, known := levels[m[2]]; known {
			if m[1] != "kern" {
				return Record{}, false
			}
			r.Level, line, dmesg = lv, m[3], true
		}
	}
	if !dmesg {
		var kernel bool
		if line, kernel = syslogText(line); !kernel {
			return Record{}, false
		}
	}
	if m := monotonic.FindStringSubmatch(line); m != nil {
		if m[1] == "" {
			r.TimeUsec = usec(m[2], m[3])
		}
		line = m[4]
		if m := monoHost.FindStringSubmatch(line); m != nil {
			line = m[1]
		}
	} else if m := wallClock.FindStringSubmatch(line); m != nil {
		line = m[1]
	} else if m := isoStamp.FindStringSubmatch(line); m != nil && dmesg {
		line = m[1]
	}
	if m := callerID.FindStringSubmatch(line); m != nil {
		r.Caller, line = m[1], m[2]
	}
	r.Text = line
	return r, true
}

// syslogText is a syslog or journal line's message, and whether the
// line is the kernel's; a line in no syslog form is returned as it is.
func syslogText(line string) (string, bool) {
	if m := isoDmesg.FindStringSubmatch(line); m != nil {
		return m[1], true
	}
	if m := hostless.FindStringSubmatch(line); m != nil {
		return m[1], true
	}
	if m := bsdSyslog.FindStringSubmatch(line); m != nil {
		return m[3], m[2] == "kernel"
	}
	if m := isoSyslog.FindStringSubmatch(line); m != nil {
		return m[3], m[2] == "kernel"
	}
	return line, true
}

// usec is "219" "47" as microseconds (219.47 s).
func usec(sec, frac string) uint64 {
	s, err := strconv.ParseUint(sec, 10, 64)
	if err != nil || s > 1<<40 {
		return 0
	}
	frac = (frac + "000000")[:6]
	f, _ := strconv.ParseUint(frac, 10, 64)
	return s*1_000_000 + f
}

// ParseReplay reads a saved kernel log, line by line (ParseText), into
// records numbered 0, 1, 2… in the file's order: a replay has no cursor of
// its own, and text lines carry no sequence number. A /dev/kmsg record's
// dictionary lines are skipped; its flags and caller are kept, so that
// lines the kernel stored in parts are joined as on a node.
func ParseReplay(data string) []Record {
	var out []Record
	afterRecord := false
	for _, line := range strings.Split(data, "\n") {
		if afterRecord && dictLine.MatchString(line) {
			continue
		}
		r, ok := ParseText(line)
		afterRecord = ok && recordHead.MatchString(line)
		if !ok {
			continue
		}
		r.Seq = uint64(len(out))
		out = append(out, r)
	}
	return out
}

// MaxReplay caps a saved kernel log: four times the largest ring a kernel
// keeps (log_buf_len is at most 32 MiB, most nodes have 1 MiB) as text.
const MaxReplay = 64 << 20

// replaySource is a saved log: every line of it is new (watched from its
// start), under a boot id of its own.
type replaySource struct {
	sliceSource
}

func (s *replaySource) watchedFrom() uint64 { return 0 }

// Replay reads a saved kernel log at path (ParseReplay) as a Source whose
// lines are all new, as if gpuhc had watched that boot from its start.
// Its boot id is "replay-" and a digest of the file: replaying the same
// file again under a state directory that kept the first replay's cursor
// finds nothing new (a second run on that node would not either), and a
// different file is a different boot (no sticky verdict carries over).
//
// The file is opened non-blocking and must be a regular file of at most
// MaxReplay bytes: a FIFO or a device would hang the run or never end.
func Replay(path string) (Source, error) {
	data, err := readReplay(path)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	recs := ParseReplay(string(data))
	if len(recs) > maxKept {
		// One run judges at most maxKept records; a replay has no next run.
		return nil, fmt.Errorf("%s: %d kernel lines, more than the %d one run judges: split the file", path, len(recs), maxKept)
	}
	s := &replaySource{sliceSource{bootID: "replay-" + hex.EncodeToString(sum[:8])}}
	s.parsed = recs
	return s, nil
}

func readReplay(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("%s: not a regular file (save the log to a file first: dmesg > FILE)", path)
	}
	if st.Size > MaxReplay {
		return nil, fmt.Errorf("%s: %d bytes, larger than the %d MiB a saved kernel log may have", path, st.Size, MaxReplay>>20)
	}
	data, err := io.ReadAll(io.LimitReader(rawFD(fd), MaxReplay+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > MaxReplay {
		return nil, fmt.Errorf("%s: larger than the %d MiB a saved kernel log may have", path, MaxReplay>>20)
	}
	return data, nil
}
