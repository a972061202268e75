package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/pml-dev/pml/broker/permit"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/trust"
)

// demoConfig is the embedded default the demo runs on.
const demoConfig = `{
  "permissions": {
    "allow": ["filesystem:*", "shell:exec"],
    "deny": []
  }
}
`

func newDemoCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "Drive a real `pml stdio` session in a temporary workspace and show each answer",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(cmd.Context(), cmd.OutOrStdout(), g.logFormat)
		},
	}
}

func runDemo(ctx context.Context, w io.Writer, logFormat string) error {
	ws, err := os.MkdirTemp("", "pml-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(ws)
	if err := os.WriteFile(filepath.Join(ws, ".pml.json"), []byte(demoConfig), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(ws, "hello.txt"), []byte("Hello from the workspace!\n"), 0o644); err != nil {
		return err
	}
	if err := os.Mkdir(filepath.Join(ws, "notes"), 0o755); err != nil {
		return err
	}
	// A listener on the host's loopback: the shell container must not reach it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	var dials atomic.Int32
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			dials.Add(1)
			conn.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	// The demo's policy is the person's own (they ran pml demo): trusted,
	// in trust records of the demo's own, gone with it.
	state, err := os.MkdirTemp("", "pml-demo-state-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(state)
	cfg, err := config.Load(ws, func(string) string { return "" })
	if err != nil {
		return err
	}
	if err := (&trust.Store{Path: filepath.Join(state, "pml", trust.FileName)}).Trust(cfg, permit.DefaultPermissions().Allow); err != nil {
		return err
	}
	// Its stderr is this one's: the same format on it.
	c := exec.CommandContext(ctx, exe, "stdio", "--log-level", "error", "--log-format", logFormat)
	c.Env = append(os.Environ(), "PML_WORKSPACE="+ws, "XDG_STATE_HOME="+state)
	c.Stderr = os.Stderr

	step := func(title string) { fmt.Fprintf(w, "\n== %s\n", title) }
	fmt.Fprintf(w, "pml demo: workspace %s, config:\n%s", ws, demoConfig)

	began := time.Now()
	client := mcp.NewClient(&mcp.Implementation{Name: "pml-demo", Version: version}, nil)
	sess, err := client.Connect(ctx, &mcp.CommandTransport{Command: c}, nil)
	if err != nil {
		return fmt.Errorf("starting pml stdio: %w", err)
	}
	defer sess.Close()
	init := sess.InitializeResult()
	step("initialize")
	fmt.Fprintf(w, "server %s %s, protocol %s (%s)\n", init.ServerInfo.Name, init.ServerInfo.Version, init.ProtocolVersion, time.Since(began).Round(time.Millisecond))

	step("tools/list")
	tools, err := sess.ListTools(ctx, nil)
	if err != nil {
		return err
	}
	for _, t := range tools.Tools {
		fmt.Fprintf(w, "  %-34s %s\n", t.Name, firstSentence(t.Description))
	}

	call := func(title, tool string, args map[string]any) error {
		step(title)
		js, _ := json.Marshal(args)
		fmt.Fprintf(w, "-> %s %s\n", tool, js)
		t0 := time.Now()
		res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			return err
		}
		status := "ok"
		if res.IsError {
			status = "isError"
		}
		fmt.Fprintf(w, "<- %s in %s\n", status, time.Since(t0).Round(time.Millisecond))
		for _, ct := range res.Content {
			if tc, ok := ct.(*mcp.TextContent); ok {
				fmt.Fprintln(w, indent(tc.Text))
			}
		}
		return nil
	}
	steps := []struct {
		title, tool string
		args        map[string]any
	}{
		{"read a workspace file", "filesystem:read_file", map[string]any{"path": "hello.txt"}},
		{"a read outside the workspace is refused before any container starts", "filesystem:read_file", map[string]any{"path": "/etc/passwd"}},
		{"write a file (read-write mount for write tools)", "filesystem:write_file", map[string]any{"path": "notes/todo.txt", "content": "written by a container\n"}},
		{"shell:exec in a container: who am I, which interfaces exist", "shell:exec", map[string]any{"command": "id; echo interfaces: $(ls /sys/class/net); ls -l " + ws}},
		{fmt.Sprintf("shell:exec cannot reach a listener on the host's 127.0.0.1:%d", port), "shell:exec", map[string]any{"command": fmt.Sprintf("nc -w 2 127.0.0.1 %d </dev/null && echo REACHED || echo 'the dial failed: the container has no route to the host'", port)}},
	}
	for _, s := range steps {
		if err := call(s.title, s.tool, s.args); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "   (the host listener saw %d connections)\n", dials.Load())
	fmt.Fprintf(w, "\ndemo finished in %s\n", time.Since(began).Round(time.Millisecond))
	return nil
}

func firstSentence(s string) string {
	if i := strings.Index(s, ". "); i > 0 {
		return s[:i+1]
	}
	return s
}

func indent(s string) string {
	return "   " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n   ")
}
