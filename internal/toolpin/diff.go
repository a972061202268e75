package toolpin

import (
	"fmt"
	"strings"

	"github.com/pml-dev/pml/internal/termsafe"
)

// maxShown bounds each part of a diff: the approval shows what changed,
// not a server's whole novel (the rest is in the pins file once accepted).
const maxShown = 600

// Summary is one line saying how a held definition differs: which of its
// parts changed, or that it is new.
func (d *Drift) Summary() string {
	if d.Was == nil {
		return fmt.Sprintf("%s is a new %s of a server whose %ss are pinned", termsafe.Quote(d.Now.Name, 200), kindOf(d.Now), kindOf(d.Now))
	}
	return fmt.Sprintf("the %s of %s changed since it was pinned", strings.Join(d.Parts(), ", "), termsafe.Quote(d.Now.Name, 200))
}

func kindOf(d Def) string {
	if d.Kind == "" {
		return KindTool
	}
	return d.Kind
}

// Parts names what of the definition changed.
func (d *Drift) Parts() []string {
	if d.Was == nil {
		return []string{"definition"}
	}
	w, n := *d.Was, d.Now
	var parts []string
	if w.Title != n.Title {
		parts = append(parts, "title")
	}
	if w.Description != n.Description {
		parts = append(parts, "description")
	}
	if string(compact(w.InputSchema)) != string(compact(n.InputSchema)) {
		parts = append(parts, "input schema")
	}
	if string(compact(w.OutputSchema)) != string(compact(n.OutputSchema)) {
		parts = append(parts, "output schema")
	}
	if string(compact(w.Annotations)) != string(compact(n.Annotations)) {
		parts = append(parts, "annotations")
	}
	if len(parts) == 0 {
		parts = append(parts, "definition")
	}
	return parts
}

// Diff is the short diff a person reads before accepting: for each part
// that changed, the pinned text (-) and the text now (+), each bounded
// and made safe for a terminal; a new definition shows what it says.
func (d *Drift) Diff() string {
	var b strings.Builder
	line := func(sign, part, v string) {
		fmt.Fprintf(&b, "%s %s: %s\n", sign, part, termsafe.Quote(v, maxShown))
	}
	if d.Was == nil {
		if d.Now.Title != "" {
			line("+", "title", d.Now.Title)
		}
		line("+", "description", d.Now.Description)
		line("+", "input schema", string(compact(d.Now.InputSchema)))
		if len(d.Now.OutputSchema) > 0 {
			line("+", "output schema", string(compact(d.Now.OutputSchema)))
		}
		if len(d.Now.Annotations) > 0 {
			line("+", "annotations", string(compact(d.Now.Annotations)))
		}
		return b.String()
	}
	w, n := *d.Was, d.Now
	for _, p := range d.Parts() {
		var a, z string
		switch p {
		case "title":
			a, z = w.Title, n.Title
		case "description":
			a, z = w.Description, n.Description
		case "input schema":
			a, z = string(compact(w.InputSchema)), string(compact(n.InputSchema))
		case "output schema":
			a, z = string(compact(w.OutputSchema)), string(compact(n.OutputSchema))
		case "annotations":
			a, z = string(compact(w.Annotations)), string(compact(n.Annotations))
		default:
			continue
		}
		line("-", p, a)
		line("+", p, z)
	}
	return b.String()
}
