// Package configdoc generates docs/configuration.md, the configuration
// reference: the keys, TOML types and defaults come from the schema
// (config.Keys, config.Default), the descriptions from the comments of
// the shipped etc/gpuhc.toml. The shipped file is what an admin edits and
// reads, so its comments are the one place a key's meaning is written;
// the reference only arranges them.
//
// How the comments of etc/gpuhc.toml are read:
//   - a comment block right above a key describes it; keys right under it
//     with no comment of their own share it;
//   - a comment block right above a [table] or [[array]] header describes
//     the table; one followed by a blank line is a note, shown where it
//     stands: before the next key or table;
//   - enabled and timeout mean the same in every check section: their
//     description is the one on their first appearance, and a comment
//     above a later section's enabled describes that section;
//   - "# e.g. key = value" is an example of that key; a comment after a
//     key on its line is part of its description (first appearance only);
//   - a "#" directly followed by a letter or "[" is an example that is
//     off, read as if it were on.
package configdoc

//go:generate go run ./gen -toml ../../../etc/gpuhc.toml -out ../../../docs/configuration.md

import (
	"fmt"
	"strings"

	"github.com/BurntSushi/toml"
)

// Example is etc/gpuhc.toml's documentation, by key and table.
type Example struct {
	Intro []string           // the file's opening comment, paragraphs
	Items []Item             // keys, tables and notes in file order
	Keys  map[string]*KeyDoc // by dotted key
}

// Item is one thing the reference shows, in the file's order.
type Item struct {
	Table string // a [table] header: its dotted name
	Array bool   // the header is [[array]]
	Key   string // a key: its dotted name
	Note  []string
	Text  []string // a table's description
	// Example lines of an off example in [[host]], shown as they are.
	HostExample []string
}

// KeyDoc is one key's documentation.
type KeyDoc struct {
	Line     int
	Text     []string // description lines; empty when shared
	SharedAs string   // key whose description this one shares
	Examples []string // "key = value" lines
	Value    string   // the value the file sets it to ("" in an off example)
	Off      bool     // only in an example that is off
	Table    string
	Name     string
	// FirstOfTable: the first key after its table's header.
	FirstOfTable bool
}

// Parse reads etc/gpuhc.toml's comments. shared says which keys are
// fields every check section shares (their first appearance documents
// them). It refuses what it cannot place.
func Parse(src string, shared func(key string) bool) (*Example, error) {
	ex := &Example{Keys: map[string]*KeyDoc{}}
	var (
		block     []string // comment lines since the last non-comment
		table     string
		firstKey  bool
		last      *KeyDoc // the key on the line before, for shared groups
		lastGroup *KeyDoc
		intro     = true
		seenField = map[string]bool{}
	)
	flushNote := func() {
		if len(block) > 0 {
			if intro {
				ex.Intro = block
			} else {
				ex.Items = append(ex.Items, Item{Note: block})
			}
		}
		block = nil
		intro = false
	}
	for i, line := range strings.Split(src, "\n") {
		n := i + 1
		line = strings.TrimRight(line, " \t\r")
		off := false
		switch {
		case line == "":
			flushNote()
			last, lastGroup = nil, nil
			continue
		case line == "#" || strings.HasPrefix(line, "# "):
			text := strings.TrimPrefix(strings.TrimPrefix(line, "#"), " ")
			if eg, ok := strings.CutPrefix(text, "e.g. "); ok && strings.Contains(eg, " = ") && len(block) == 0 && last != nil {
				name, _, _ := strings.Cut(eg, " = ")
				key := join(table, strings.TrimSpace(name))
				kd := ex.Keys[key]
				if kd == nil {
					return nil, fmt.Errorf("line %d: example of %q, which the file does not set", n, key)
				}
				kd.Examples = append(kd.Examples, eg)
				continue
			}
			block = append(block, text)
			continue
		case strings.HasPrefix(line, "#"):
			off, line = true, line[1:]
		}
		intro = false
		// A header or a key, on or off.
		content, trailing := splitTrailing(line)
		if strings.HasPrefix(content, "[") {
			array := strings.HasPrefix(content, "[[")
			name := strings.Trim(content, "[] ")
			if strings.HasPrefix(name, "host.") || (name == "host" && table == "host") {
				ex.hostExample(line)
				block, last = nil, nil
				table = "host"
				continue
			}
			table, firstKey, last, lastGroup = name, true, nil, nil
			if array && ex.hasTable(name) {
				// Another entry of an [[array]] example: shown once.
				block = nil
				continue
			}
			ex.Items = append(ex.Items, Item{Table: name, Array: array, Text: block})
			block = nil
			if name == "host" {
				ex.hostExample(line)
			}
			continue
		}
		name, value, ok := strings.Cut(content, "=")
		if !ok {
			return nil, fmt.Errorf("line %d: neither a comment, a table nor a key: %q", n, line)
		}
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		key := join(table, name)
		if table == "host" || strings.HasPrefix(table, "host.") {
			ex.hostExample(line)
			if name != "match" {
				block, last = nil, nil
				continue
			}
		}
		if kd := ex.Keys[key]; kd != nil {
			// An off example repeating a key ([[array]] entries): its
			// first appearance documents it.
			if !kd.Off || !off {
				return nil, fmt.Errorf("line %d: %s is set twice", n, key)
			}
			block, last = nil, kd
			continue
		}
		kd := &KeyDoc{Line: n, Table: table, Name: name, Off: off, FirstOfTable: firstKey}
		if !off {
			kd.Value = value
		}
		text := block
		if trailing != "" {
			text = append(text, trailing)
		}
		switch {
		case shared(key) && seenField[name]:
			// A later section's enabled or timeout: the comment above
			// the first key is the section's own description.
			if firstKey && len(block) > 0 {
				ex.Items[len(ex.Items)-1].Text = append(ex.Items[len(ex.Items)-1].Text, block...)
			} else {
				kd.Text = text
			}
			lastGroup = nil // keys below it have their own meaning
		case len(text) > 0:
			kd.Text = text
			lastGroup = kd
		case last != nil && lastGroup != nil && last.Table == table:
			kd.SharedAs = join(lastGroup.Table, lastGroup.Name)
		}
		if shared(key) {
			seenField[name] = true
		}
		ex.Keys[key] = kd
		ex.Items = append(ex.Items, Item{Key: key})
		block, last, firstKey = nil, kd, false
	}
	flushNote()
	return ex, nil
}

func (ex *Example) hasTable(name string) bool {
	for _, it := range ex.Items {
		if it.Table == name {
			return true
		}
	}
	return false
}

func (ex *Example) hostExample(line string) {
	for i := len(ex.Items) - 1; i >= 0; i-- {
		if ex.Items[i].Table == "host" {
			ex.Items[i].HostExample = append(ex.Items[i].HostExample, line)
			return
		}
	}
}

// splitTrailing cuts a "# comment" after a key or header, outside strings.
func splitTrailing(line string) (content, comment string) {
	var quote byte
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0 && c == '\\' && quote == '"':
			i++
		case quote != 0 && c == quote:
			quote = 0
		case quote == 0 && (c == '"' || c == '\''):
			quote = c
		case quote == 0 && c == '#':
			return strings.TrimSpace(line[:i]), strings.TrimSpace(line[i+1:])
		}
	}
	return strings.TrimSpace(line), ""
}

func join(table, name string) string {
	if table == "" {
		return name
	}
	return table + "." + toml.Key{name}.String()
}
