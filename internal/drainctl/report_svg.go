package drainctl

import (
	"bytes"
	"cmp"
	"html/template"
	"slices"
	"strconv"
	"time"

	"github.com/gpuhc/gpuhc/internal/stats"
)

// The charts are drawn here as inline SVG, through html/template, so a
// node name or reason from the logs is escaped like any other text and
// the page needs no script or library from anywhere.

type bar struct {
	Y, W, H, TextY float64
	Label, Title   string
	Class          string
	X              float64
}

type chart struct {
	Width, Height float64
	Bars          []bar
	Labels        []bar
	Axis          []bar
}

var svgTmpl = template.Must(template.New("svg").Parse(`<svg xmlns="http://www.w3.org/2000/svg" width="{{.Width}}" height="{{.Height}}" viewBox="0 0 {{.Width}} {{.Height}}" role="img">
{{- range .Axis}}<text x="{{.X}}" y="{{.TextY}}" class="axis">{{.Label}}</text>{{end}}
{{- range .Labels}}<text x="{{.X}}" y="{{.TextY}}" class="label">{{.Label}}</text>{{end}}
{{- range .Bars}}<rect x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="{{.H}}" class="{{.Class}}"><title>{{.Title}}</title></rect>{{end}}
</svg>`))

func drawSVG(c chart) template.HTML {
	var b bytes.Buffer
	if err := svgTmpl.Execute(&b, c); err != nil {
		// Only a template bug can fail here; the page says so instead of a chart.
		return template.HTML(template.HTMLEscapeString("chart not drawn: " + err.Error()))
	}
	return template.HTML(b.String()) // html/template escaped every field
}

// timelineSVG draws one row per node (the timelineRows with the most
// drains), each drain a bar from drain to resume, open ones to now. It
// returns how many nodes were left out.
func timelineSVG(all []span) (template.HTML, int) {
	if len(all) == 0 {
		return "", 0
	}
	count := map[string]int{}
	lo, hi := all[0].From, all[0].To
	for _, s := range all {
		count[s.Node]++
		lo, hi = minTime(lo, s.From), maxTime(hi, s.To)
	}
	nodes := make([]string, 0, len(count))
	for n := range count {
		nodes = append(nodes, n)
	}
	slices.SortFunc(nodes, func(a, b string) int { return cmp.Or(count[b]-count[a], cmp.Compare(a, b)) })
	left := 0
	if len(nodes) > timelineRows {
		left, nodes = len(nodes)-timelineRows, nodes[:timelineRows]
	}
	row := map[string]int{}
	for i, n := range nodes {
		row[n] = i
	}
	const labelW, plotW, rowH = 160.0, 800.0, 16.0
	span := max(hi.Sub(lo), time.Minute)
	x := func(t time.Time) float64 { return labelW + plotW*float64(t.Sub(lo))/float64(span) }
	c := chart{Width: labelW + plotW + 10, Height: rowH*float64(len(nodes)) + 30}
	for i, n := range nodes {
		c.Labels = append(c.Labels, bar{X: 0, TextY: rowH*float64(i) + 12, Label: n})
	}
	for _, s := range all {
		i, ok := row[s.Node]
		if !ok {
			continue
		}
		class, state := "drain", "resumed "+s.To.UTC().Format(time.RFC3339)
		if s.Open {
			class, state = "open", "still drained"
		}
		c.Bars = append(c.Bars, bar{X: x(s.From), Y: rowH*float64(i) + 2, W: max(x(s.To)-x(s.From), 2), H: rowH - 4,
			Class: class, Title: s.Node + ": " + s.Reason + " (drained " + s.From.UTC().Format(time.RFC3339) + ", " + state + ")"})
	}
	base := rowH*float64(len(nodes)) + 20
	c.Axis = []bar{{X: labelW, TextY: base, Label: lo.UTC().Format("2006-01-02 15:04")},
		{X: labelW + plotW - 110, TextY: base, Label: hi.UTC().Format("2006-01-02 15:04")}}
	return drawSVG(c), left
}

// barsSVG draws the episodes of each row, longest first.
func barsSVG(rows []stats.Row) template.HTML {
	rows = slices.Clone(rows)
	slices.SortStableFunc(rows, func(a, b stats.Row) int { return b.Episodes - a.Episodes })
	most := 0
	for _, r := range rows {
		most = max(most, r.Episodes)
	}
	if most == 0 {
		return ""
	}
	const labelW, plotW, rowH = 200.0, 600.0, 18.0
	c := chart{Width: labelW + plotW + 60, Height: rowH * float64(len(rows))}
	for i, r := range rows {
		y := rowH * float64(i)
		w := plotW * float64(r.Episodes) / float64(most)
		c.Labels = append(c.Labels, bar{X: 0, TextY: y + 13, Label: r.Key},
			bar{X: labelW + w + 4, TextY: y + 13, Label: strconv.Itoa(r.Episodes)})
		c.Bars = append(c.Bars, bar{X: labelW, Y: y + 2, W: max(w, 1), H: rowH - 4, Class: "episodes",
			Title: r.Key + ": " + strconv.Itoa(r.Episodes) + " episodes"})
	}
	return drawSVG(c)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
