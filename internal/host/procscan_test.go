package host

import "github.com/gpuhc/gpuhc/internal/procscan"

// parseStat is procscan.ParseStat as host.processes uses it, for the
// tests written against host's own parser before it moved there.
func parseStat(b []byte) (comm string, state byte, err error) {
	st, err := procscan.ParseStat(b)
	return st.Comm, st.State, err
}
