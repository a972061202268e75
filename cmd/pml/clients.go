package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/pml-dev/pml/internal/clients"
	"github.com/pml-dev/pml/internal/workspace"
)

// clientRow is one line of pml clients.
type clientRow struct {
	Name      string `json:"name"`
	Title     string `json:"title"`
	Installed bool   `json:"installed"`
	// Detected is the path that shows it is installed.
	Detected string       `json:"detected,omitempty"`
	Project  *clientScope `json:"project,omitempty"`
	User     clientScope  `json:"user"`
}

type clientScope struct {
	Path  string `json:"path"`
	State string `json:"state"`
	// Workspace is the workspace pml's entry names, when another.
	Workspace string `json:"workspace,omitempty"`
	Error     string `json:"error,omitempty"`
}

func newClientsCmd() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "clients",
		Short: "List the MCP clients pml knows: installed or not, configured for this workspace or not",
		Long: `List every MCP client pml init can configure, whether it seems installed (its configuration
directory exists), and whether pml is configured in its project file (in this workspace) and in its
user file: configured (for this workspace), other-workspace (pml's entry names another workspace),
not-configured, or unreadable. pml init --client NAME configures one.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return &exitError{2, fmt.Errorf("pml clients takes no arguments (got %q)", args)}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "table" && format != "json" {
				return &exitError{2, fmt.Errorf("--format %q: use table or json", format)}
			}
			cwd, err := os.Getwd()
			if err != nil {
				return &exitError{2, fmt.Errorf("cannot read the current directory: %w", err)}
			}
			ws, err := workspace.Resolve(os.Getenv, cwd)
			if err != nil {
				return &exitError{2, err}
			}
			rows := clientRows(ws.Dir, clients.EnvFrom(os.Getenv))
			if format == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(map[string]any{"workspace": ws.Dir, "clients": rows})
			}
			printClients(cmd.OutOrStdout(), ws.Dir, rows)
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "table", "output format: table or json")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitError{2, fmt.Errorf("%v (see pml clients --help)", err)}
	})
	return cmd
}

// clientRows reads every client's state for the workspace ws.
func clientRows(ws string, env clients.Env) []clientRow {
	var rows []clientRow
	for _, c := range clients.All {
		r := clientRow{Name: c.Name, Title: c.Title}
		if env.Home != "" {
			r.Installed, r.Detected = c.Installed(env)
			r.User = scopeRow(c.Status(clients.User, ws, env))
		} else {
			r.User = clientScope{State: string(clients.Unreadable), Error: "HOME is not set"}
		}
		if c.Has(clients.Project) {
			s := scopeRow(c.Status(clients.Project, ws, env))
			r.Project = &s
		}
		rows = append(rows, r)
	}
	return rows
}

func scopeRow(st clients.Status) clientScope {
	s := clientScope{Path: st.Path, State: string(st.Scope)}
	if st.Scope == clients.Elsewhere {
		s.Workspace = st.Workspace
	}
	if st.Err != nil {
		s.Error = st.Err.Error()
	}
	return s
}

func printClients(w io.Writer, ws string, rows []clientRow) {
	fmt.Fprintf(w, "Workspace: %s\n\n", ws)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLIENT\tINSTALLED\tPROJECT\tUSER")
	for _, r := range rows {
		inst := "no"
		if r.Installed {
			inst = "yes"
		}
		proj := "-"
		if r.Project != nil {
			proj = describeScope(*r.Project, ws)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Name, inst, proj, describeScope(r.User, ""))
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "\npml init --client NAME [--scope project|user] configures a client.")
}

// describeScope is "state (file)", the file relative to ws when given.
func describeScope(s clientScope, ws string) string {
	path := s.Path
	if ws != "" {
		if rel, err := filepath.Rel(ws, path); err == nil {
			path = rel
		}
	}
	out := s.State
	if s.Workspace != "" {
		out += " (" + s.Workspace + ")"
	}
	if s.Error != "" {
		out += ": " + s.Error
	}
	if path != "" {
		out += " " + path
	}
	return out
}
