package drainctl

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// table is what a command prints as a table or CSV; JSON prints the typed
// rows themselves.
type table struct {
	head []string
	rows [][]string
	// empty is printed instead of a table without rows.
	empty string
}

// emit prints t (or, with --json, v) in the chosen format.
func emit(w io.Writer, format string, t table, v any) error {
	switch format {
	case formatJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case formatCSV:
		cw := csv.NewWriter(w)
		head := make([]string, len(t.head))
		for i, h := range t.head {
			head[i] = strings.ReplaceAll(strings.ToLower(h), " ", "_")
		}
		if err := cw.Write(head); err != nil {
			return err
		}
		if err := cw.WriteAll(t.rows); err != nil {
			return err
		}
		cw.Flush()
		return cw.Error()
	}
	if len(t.rows) == 0 && t.empty != "" {
		_, err := fmt.Fprintln(w, t.empty)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	writeRow(tw, t.head)
	for _, r := range t.rows {
		writeRow(tw, r)
	}
	return tw.Flush()
}

func writeRow(w io.Writer, cells []string) {
	out := make([]string, len(cells))
	for i, c := range cells {
		c = strings.Map(func(r rune) rune {
			if r == '\t' || r == '\n' || r == '\r' {
				return ' '
			}
			return r
		}, c)
		if c == "" {
			c = "-"
		}
		out[i] = c
	}
	fmt.Fprintln(w, strings.Join(out, "\t"))
}

// stamp formats a time for tables and CSV: local, to the second.
func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

// csvTime is a time for CSV: RFC 3339, which spreadsheets and scripts parse.
func csvTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Format(time.RFC3339)
}

// human prints a duration the way an admin reads it: 3d4h, 2h5m, 42s.
func human(d time.Duration) string {
	if d < 0 {
		return ""
	}
	d = d.Round(time.Second)
	days := d / (24 * time.Hour)
	d -= days * 24 * time.Hour
	h := d / time.Hour
	d -= h * time.Hour
	m := d / time.Minute
	s := (d - m*time.Minute) / time.Second
	switch {
	case days > 0:
		return fmt.Sprintf("%dd%dh", days, h)
	case h > 0:
		return fmt.Sprintf("%dh%dm", h, m)
	case m > 0:
		return fmt.Sprintf("%dm%ds", m, s)
	}
	return fmt.Sprintf("%ds", s)
}

// timePtr keeps an unknown (zero) time out of JSON.
func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
