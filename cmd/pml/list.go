package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/internal/deps"
	"github.com/pml-dev/pml/internal/registry"
	"github.com/pml-dev/pml/internal/termsafe"
)

// pml list as a table: one section per kind, each row NAME, SOURCE,
// VERSION and STATE, and one line at the end when the engine could not be
// asked.

// shown is a string from a repository, a server or a registry as pml
// prints it for a person: control and bidi characters quoted, bounded
// (internal/termsafe).
func shown(s string) string { return termsafe.Quote(s, termsafe.DefaultMax) }

func writeListing(w io.Writer, l tl.Listing) {
	tw := tabwriter.NewWriter(w, 2, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "Built-in tools:")
	for _, b := range l.Builtin {
		fmt.Fprintf(tw, "  %s\t%s (%s)\t%s\t%s\n", b.Name, b.Source, b.Runs, dash(shown(b.Version)), stateText(b.Health, b.Tools, ""))
	}
	if len(l.Servers) == 0 {
		fmt.Fprintln(tw, "No MCP servers in .pml.json (pml add npm:PACKAGE or oci:IMAGE adds one).")
	} else {
		fmt.Fprintln(tw, "MCP servers (.pml.json):")
		for _, s := range l.Servers {
			src := s.Source
			switch {
			case s.Package != "":
				src += " " + s.Package
			case s.Image != "":
				src += " (image " + s.Image + ")"
			}
			// A repository's and a registry's strings: quoted and bounded.
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", shown(s.Name), shown(src), dash(shown(s.Version)), stateText(s.Health, s.Tools, ""))
		}
	}
	if len(l.Capabilities) == 0 {
		fmt.Fprintln(tw, "No capabilities added (pml add NAME adds one).")
	} else {
		fmt.Fprintln(tw, "Capabilities added from a registry (pml add NAME):")
		for _, c := range l.Capabilities {
			src := c.Source
			if src == "" {
				src = "registry unknown"
			}
			if c.Package != "" {
				src += " (npm " + c.Package + ")"
			}
			what := fmt.Sprintf("%s, %s, mcp.%s.*", c.Type, where(c.Routing), c.Namespace)
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s: %s\n", shown(c.Name), shown(src), dash(shown(c.Version)), shown(what), shown(stateText(c.Health, c.ToolCount, c.Note)))
		}
	}
	_ = tw.Flush()
	if l.EngineErr != "" {
		fmt.Fprintf(w, "Image and container states are unknown: %s\n", oneLine(l.EngineErr))
	}
}

// stateText is a row's state in words: install, image, container, tool
// count, and note, each only where it applies.
func stateText(h tl.Health, tools int, note string) string {
	var parts []string
	switch h.Install {
	case deps.StatusInstalled:
		parts = append(parts, "installed")
	case deps.StatusOutdated:
		parts = append(parts, "installed for another version (its next start installs the pinned one)")
	case deps.StatusMissing:
		parts = append(parts, "not installed (its first call installs it)")
	}
	switch {
	case h.EngineErr != "":
		parts = append(parts, "image and container unknown (engine unreachable)")
	case h.ImagePresent == nil:
	case *h.ImagePresent:
		parts = append(parts, "image present")
	default:
		parts = append(parts, "image missing ("+h.Image+": pml images pull)")
	}
	if h.Running != nil {
		if *h.Running {
			parts = append(parts, "running")
		} else {
			parts = append(parts, "stopped")
		}
	}
	if tools > 0 {
		parts = append(parts, plural(tools, "tool"))
	}
	if note != "" {
		parts = append(parts, note)
	}
	return strings.Join(parts, ", ")
}

// where is a capability's routing in words.
func where(routing string) string {
	if routing == registry.RoutingServer {
		return "cloud"
	}
	return "local"
}
