package drainctl

import (
	"fmt"
	"html/template"
)

// reportTmpl is the page. Everything from the logs goes through
// html/template's contextual escaping; the stats object is JSON in a
// data block (json.Marshal escapes <, > and &), which no script runs.
var reportTmpl = template.Must(template.New("report").Funcs(template.FuncMap{
	"mulf": func(f float64) float64 { return f * 100 },
	"dict": dict,
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>gpuhc fleet report</title>
<style>
body { font: 14px/1.4 sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 2px 8px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
rect.drain { fill: #d98c2b; } rect.open { fill: #c0392b; } rect.episodes { fill: #3b6ea8; }
text.label, text.axis { font: 11px sans-serif; fill: #333; }
.none { color: #777; font-style: italic; }
</style>
</head>
<body>
<h1>gpuhc fleet report</h1>
<p id="window">Generated {{.Generated}}.
{{- with .Rep.Window.From}} Events from {{.UTC.Format "2006-01-02 15:04"}}{{end}}
{{- with .Rep.Window.To}} to {{.UTC.Format "2006-01-02 15:04"}} UTC{{end}}.
{{.Rep.Events}} events read{{with .Rep.Filter.Node}}, nodes {{.}}{{end}}{{with .Rep.Filter.Check}}, check {{.}}{{end}}.</p>
{{if eq .Rep.Events 0}}<p class="none" id="no-data">No data: the event logs held no event in this window.</p>{{end}}

<h2 id="fleet">Fleet</h2>
<table id="fleet-table"><tr>{{range .Columns}}<th>{{.}}</th>{{end}}</tr>
<tr>{{range .Fleet}}<td>{{.}}</td>{{end}}</tr></table>

<h2 id="timeline">Drains timeline</h2>
{{if .Timeline}}{{.Timeline}}{{if .TimelineTruncated}}<p>{{.TimelineTruncated}} more nodes with fewer drains are not drawn; the tables list every node.</p>{{end}}
{{else}}<p class="none">No drain in this window.</p>{{end}}

<h2 id="open-drains">Open drains</h2>
{{if .OpenDrains}}<table id="open-table"><tr><th>node</th><th>since</th><th>check</th><th>reason</th></tr>
{{range .OpenDrains}}<tr><td>{{.Node}}</td><td>{{.From.UTC.Format "2006-01-02 15:04"}}</td><td>{{.Check}}</td><td>{{.Reason}}</td></tr>
{{end}}</table>{{else}}<p class="none">No open drain.</p>{{end}}

<h2 id="lemons">Lemons (at least {{.Rep.LemonMin}} episodes)</h2>
{{if .Lemons}}<table id="lemon-table"><tr><th>rank</th><th>kind</th><th>key</th><th>episodes</th><th>share</th><th>nodes</th></tr>
{{range .Lemons}}<tr><td>{{.Rank}}</td><td>{{.Kind}}</td><td>{{.Key}}</td><td>{{.Episodes}}</td><td>{{printf "%.1f%%" (mulf .Share)}}</td><td>{{range $i, $n := .Nodes}}{{if $i}}, {{end}}{{$n}}{{end}}</td></tr>
{{end}}</table>{{else}}<p class="none">No lemon.</p>{{end}}

<h2 id="checks">Failures by check</h2>
{{.CheckChart}}
{{template "rows" dict "ID" "check-table" "Cols" .Columns "Rows" .Checks}}

<h2 id="nodes">MTTF and MTTR per node</h2>
{{template "rows" dict "ID" "node-table" "Cols" .Columns "Rows" .Nodes}}

<h2 id="types">MTTF and MTTR per component type</h2>
<p>The events name no GPU model; the component type (gpu, nic, host, ...) is the closest breakdown they carry.</p>
{{template "rows" dict "ID" "type-table" "Cols" .Columns "Rows" .Types}}

<h2 id="serials">Per GPU serial</h2>
{{template "rows" dict "ID" "serial-table" "Cols" .Columns "Rows" .Serials}}

<script type="application/json" id="gpuhc-stats">{{.StatsJSON}}</script>
</body>
</html>
{{define "rows"}}{{if .Rows}}<table id="{{.ID}}"><tr>{{range .Cols}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>{{else}}<p class="none">None.</p>{{end}}{{end}}`))

// dict passes named values to a sub-template.
func dict(kv ...any) (map[string]any, error) {
	if len(kv)%2 != 0 {
		return nil, fmt.Errorf("dict: odd number of arguments")
	}
	m := make(map[string]any, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		k, ok := kv[i].(string)
		if !ok {
			return nil, fmt.Errorf("dict: key %v is not a string", kv[i])
		}
		m[k] = kv[i+1]
	}
	return m, nil
}
