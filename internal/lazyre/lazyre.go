// Package lazyre is a regular expression compiled the first time it is
// used. gpuhc-healthcheck is a process that lives for a few milliseconds
// every interval; compiling every rule table's expressions at package init
// cost it about 1.7 ms of CPU per run, mostly for tables (kernel-log rules,
// text-log formats, tool outputs) that a healthy run never consults
// (docs/performance.md, "Start-up").
//
// A Regexp is safe for concurrent use, as regexp.Regexp is. An invalid
// expression panics on first use, as regexp.MustCompile would at init; the
// tests of each table compile every row (Compile) so that it cannot ship.
package lazyre

import (
	"regexp"
	"sync"
)

// Regexp compiles expr once, on first use.
type Regexp struct {
	expr string
	get  func() *regexp.Regexp
}

// New returns expr, compiled when first used.
func New(expr string) *Regexp {
	return &Regexp{expr: expr, get: sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })}
}

// Compile compiles r now and returns it, or the compile error.
func (r *Regexp) Compile() (*regexp.Regexp, error) {
	if _, err := regexp.Compile(r.expr); err != nil {
		return nil, err
	}
	return r.get(), nil
}

// Re is the compiled expression, for the methods not forwarded below.
func (r *Regexp) Re() *regexp.Regexp { return r.get() }

// String is the source text; it compiles nothing.
func (r *Regexp) String() string { return r.expr }

func (r *Regexp) MatchString(s string) bool              { return r.get().MatchString(s) }
func (r *Regexp) FindString(s string) string             { return r.get().FindString(s) }
func (r *Regexp) FindStringIndex(s string) []int         { return r.get().FindStringIndex(s) }
func (r *Regexp) FindStringSubmatch(s string) []string   { return r.get().FindStringSubmatch(s) }
func (r *Regexp) FindStringSubmatchIndex(s string) []int { return r.get().FindStringSubmatchIndex(s) }
func (r *Regexp) FindAllStringSubmatch(s string, n int) [][]string {
	return r.get().FindAllStringSubmatch(s, n)
}
func (r *Regexp) ReplaceAllString(src, repl string) string {
	return r.get().ReplaceAllString(src, repl)
}
func (r *Regexp) SubexpNames() []string          { return r.get().SubexpNames() }
func (r *Regexp) SubexpIndex(name string) int    { return r.get().SubexpIndex(name) }
func (r *Regexp) NumSubexp() int                 { return r.get().NumSubexp() }
func (r *Regexp) Match(b []byte) bool            { return r.get().Match(b) }
func (r *Regexp) FindSubmatch(b []byte) [][]byte { return r.get().FindSubmatch(b) }
