package bandwidth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gpuhc/gpuhc/internal/config"
)

// ibWrite runs ib_write_bw in loopback for each configured HCA pair.
func (m *measurement) ibWrite(ctx context.Context, c config.Bandwidth) {
	var bad []string
	done := map[string]bool{}
	for _, pair := range c.IBWritePairs {
		server, client, err := config.ParseHCAPair(pair)
		if err != nil {
			bad = append(bad, err.Error())
			continue
		}
		comp := server + "-" + client
		if done[comp] {
			// Listed twice: measuring again tells nothing new, and a
			// second result under the component would read as flapping.
			continue
		}
		done[comp] = true
		gbps, err := ibLoopback(ctx, c.IBWriteBW, server, client, c.IBWriteArgs)
		if err != nil {
			m.add(errorf(figureComponent(comp, KindIBWrite), "ib_write_bw: %s", printable(err.Error())))
			continue
		}
		j := judged{component: comp, kind: KindIBWrite, label: "ib_write_bw", unit: "Gb/s",
			value: gbps, floor: c.IBWriteGbps, noFloor: "no floor set"}
		m.addFigure(j.verdict())
	}
	if len(bad) > 0 {
		// One result, as the component is the tool's, not a pair's.
		m.add(errorf("ib_write_bw", "checks.bandwidth.ib_write_pairs: %s", printable(strings.Join(bad, "; "))))
	}
}

// Retries of the client while the server starts listening.
const (
	ibClientTries = 10
	ibRetryPause  = 300 * time.Millisecond
)

// ibLoopback measures RDMA writes from client to server, two HCAs of this
// node: traffic leaves through one port and comes back through the other
// (through the switch on InfiniBand). It returns the client's average in
// Gb/s.
func ibLoopback(ctx context.Context, path, server, client string, extra []string) (float64, error) {
	if err := checkTool(path); err != nil {
		return 0, err
	}
	if ctx.Err() != nil {
		return 0, fmt.Errorf("%s: not run: out of time", path)
	}
	common := append([]string{"-F", "--report_gbits"}, extra...)
	sctx, stop := context.WithCancel(ctx)
	sout, serr := &capped{max: maxOutput}, &capped{max: maxOutput}
	srv := toolCommand(sctx, path, append([]string{"-d", server}, common...), sout, serr)
	if err := srv.Start(); err != nil {
		stop()
		return 0, fmt.Errorf("start %s: %w", path, err)
	}
	exited := make(chan struct{})
	var srvErr error
	go func() {
		srvErr = srv.Wait()
		close(exited)
	}()
	defer func() {
		stop() // kills the server if it is still waiting for a client
		<-exited
	}()
	// The server's "Waiting for client" banner can sit in its stdout
	// buffer (a pipe, not a terminal), so rather than wait for it the
	// client retries while the connection is refused.
	clientArgs := append(append([]string{"-d", client}, common...), "127.0.0.1")
	for try := 1; ; try++ {
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%s: out of time waiting for the server on %s", path, server)
		case <-exited:
			return 0, fmt.Errorf("server on %s ended before the client ran: %s", server,
				printable(toolError(ctx, path, srvErr, output{stdout: sout.buf.Bytes(), stderr: serr.buf.Bytes()}, time.Now()).Error()))
		case <-time.After(ibRetryPause):
		}
		out, err := runTool(ctx, path, clientArgs...)
		if err != nil && refused(out) && try < ibClientTries {
			continue
		}
		if err != nil {
			return 0, err
		}
		v, perr := parseIBWriteBW(out.stdout)
		if perr != nil {
			return 0, fmt.Errorf("output not understood: %w", perr)
		}
		return v, nil
	}
}

// refused reports perftest's client failing to reach a server that is
// not listening yet.
func refused(out output) bool {
	return bytes.Contains(out.stderr, []byte("Couldn't connect")) || bytes.Contains(out.stdout, []byte("Couldn't connect"))
}

// parseIBWriteBW reads the client's result table, e.g.
//
//	#bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
//	65536      5000             390.59             390.41 		   0.744648
//
// and returns the average of the last line (the largest size when several
// sizes ran).
func parseIBWriteBW(out []byte) (float64, error) {
	ls := lines(out)
	for i, l := range ls {
		_, after, ok := strings.Cut(l, "BW average[")
		if !ok {
			continue
		}
		unit, _, _ := strings.Cut(after, "]")
		if unit != "Gb/sec" {
			return 0, fmt.Errorf("averages in %q, not Gb/sec (--report_gbits ignored?)", printable(unit))
		}
		var avg float64
		found := false
		for _, d := range ls[i+1:] {
			f := strings.Fields(d)
			if len(f) == 0 {
				continue
			}
			if strings.HasPrefix(f[0], "---") {
				break
			}
			v, err := ibResultLine(f)
			if err != nil {
				return 0, fmt.Errorf("result line %q: %w", printable(d), err)
			}
			avg, found = v, true
		}
		if !found {
			return 0, errors.New("no result line under the BW average header")
		}
		return avg, nil
	}
	return 0, errors.New(`no "BW average" header: the test did not finish`)
}

// ibResultLine reads "#bytes #iterations peak average msgrate".
func ibResultLine(f []string) (float64, error) {
	if len(f) < 4 {
		return 0, fmt.Errorf("%d fields, want at least 4", len(f))
	}
	if _, err := strconv.ParseUint(f[0], 10, 64); err != nil {
		return 0, errors.New("no message size")
	}
	if _, err := strconv.ParseUint(f[1], 10, 64); err != nil {
		return 0, errors.New("no iteration count")
	}
	v, err := strconv.ParseFloat(f[3], 64)
	if err != nil || !(v >= 0) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("average %q is not a bandwidth", f[3])
	}
	return v, nil
}
