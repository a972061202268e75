package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/pml-dev/pml/broker/call"
)

// toolJSON is one tool in pml tools --format json.
type toolJSON struct {
	Name        string          `json:"name"`
	WireName    string          `json:"wire_name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	// Held is how the tool's definition drifted from the one accepted
	// ("changed: description", "new"); "" when it is not held. A held
	// tool's call asks the person first (docs/security.md).
	Held string `json:"held,omitempty"`
}

func newToolsCmd(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "tools [NAME…]",
		Short: "List every tool an MCP client would see here, with its wire name, description and input schema",
		Long: "List the tools pml stdio would show a client in this workspace: the built-in tools and every installed\n" +
			"MCP server's, minus those permissions.deny hides. A server's list comes from the tools cache\n" +
			"(.pml/tools-cache.json); a server whose list is not cached is started once to ask it. NAME keeps only\n" +
			"the tools of that server or group (everything, filesystem) or that tool (everything:echo, or its wire\n" +
			"name). The wire name is what the client calls; pml call takes either. --format json prints a list of\n" +
			"{name, wire_name, description, input_schema, held}; held (\"changed: description\", \"new: definition\") marks a\n" +
			"tool whose definition is not the one accepted here: its call asks first (pml lock shows the diff).\n\n" +
			"Exit codes: 0 listed, 1 failed, 2 a NAME that matches nothing.",
		Example: "  pml tools\n  pml tools everything --format json\n  pml tools filesystem:read_file",
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := outputFormat(cmd, format, false)
			if err != nil {
				return err
			}
			e, err := g.setup()
			if err != nil {
				return err
			}
			defer e.rt.Close()
			defer e.broker.Close(30 * time.Second)
			e.broker.LoadServers(cmd.Context())
			for _, s := range e.broker.Servers(cmd.Context()) {
				if !s.Installed {
					fmt.Fprintf(g.warnings(), "%s is not installed, so its tools are not listed: its first call installs it after approval (or pml images pull when \"%s:*\" is allowed)\n", shown(s.Name), shown(s.Name))
				}
			}
			var out []toolJSON
			matched := map[string]bool{}
			for _, t := range e.broker.ListedTools() {
				if t.Name == call.ContinueTool && len(args) == 0 {
					continue
				}
				if len(args) > 0 {
					hit := false
					for _, a := range args {
						ns, _, _ := strings.Cut(t.Name, ":")
						if a == ns || a == t.Name || a == t.Wire {
							hit, matched[a] = true, true
						}
					}
					if !hit {
						continue
					}
				}
				tj := toolJSON{Name: t.Name, WireName: t.Wire, Description: t.Description, InputSchema: t.InputSchema}
				if change, parts := e.broker.HeldTool(t.Name); change != "" {
					tj.Held = change + ": " + strings.Join(parts, ", ")
				}
				out = append(out, tj)
			}
			for _, a := range args {
				if !matched[a] {
					return &exitError{2, fmt.Errorf("no tool or server here is named %q (pml tools lists them all; pml list shows the servers)", a)}
				}
			}
			if out == nil {
				out = []toolJSON{}
			}
			w := cmd.OutOrStdout()
			if f == formatJSON {
				return writeJSON(w, out)
			}
			tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "WIRE NAME\tNAME\tARGUMENTS\tDESCRIPTION")
			for _, t := range out {
				desc := firstLine(t.Description)
				if t.Held != "" {
					desc = "HELD (" + t.Held + "; pml lock shows the diff) " + desc
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.WireName, shown(t.Name), shown(argSummary(t.InputSchema)), desc)
			}
			return tw.Flush()
		},
	}
	addFormatFlag(cmd, &format, nil)
	return cmd
}

// argSummary names a schema's arguments, the required ones first and
// marked: "path*, head, tail".
func argSummary(raw json.RawMessage) string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if json.Unmarshal(raw, &s) != nil || len(s.Properties) == 0 {
		return "-"
	}
	req := map[string]bool{}
	var parts []string
	for _, r := range s.Required {
		if _, ok := s.Properties[r]; ok && !req[r] {
			req[r] = true
			parts = append(parts, r+"*")
		}
	}
	var rest []string
	for k := range s.Properties {
		if !req[k] {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	return strings.Join(append(parts, rest...), ", ")
}
