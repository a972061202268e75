package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pml-dev/pml/broker"
	"github.com/pml-dev/pml/internal/config"
)

// callOutput is what pml call prints on stdout: exactly one JSON object on
// one line, whatever happens (a usage error too), and nothing else. Its
// fields are stable; new fields may be added, none removed or renamed.
type callOutput struct {
	Tool     string `json:"tool"`
	Outcome  string `json:"outcome"`
	ExitCode int    `json:"exit_code"`
	IsError  bool   `json:"is_error"`
	// Text is the tool's text content, or pml's message.
	Text string `json:"text"`
	// Structured is the tool's structured content (the approval for
	// approval_required), null when there is none.
	Structured any `json:"structured"`
}

// maxArgs bounds the ARGS read from stdin.
const maxArgs = 64 << 20

func newCallCmd(g *globals) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "call TOOL [ARGS_JSON|-]",
		Short: "Run one tool call (for CI): JSON result on stdout, exit code by outcome",
		Long: `Run one tool call through the same path as pml stdio (permissions, approvals, containers with
the same policy, cloud forwarding) and exit. ARGS_JSON is the tool's arguments as a JSON object
(default {}); "-" reads it from stdin. TOOL is pml's name (filesystem:read_file) or the name MCP
clients see on the wire (filesystem__read_file); the output names it the first way. pml call never prompts and never waits for a person: a call
that needs approval exits 3 and says what to allow.

Stdout holds exactly one line, one JSON object, and nothing else:
  {"tool": "…", "outcome": "ok", "exit_code": 0, "is_error": false, "text": "…", "structured": …}
Logs go to stderr: warnings and errors only (-D or --log-level info|debug for more).

Exit codes:
` + exitTable() + `
--timeout bounds the whole call; when it expires (or on Ctrl-C) the container is killed and removed.`,
		Example: `  pml call filesystem:read_file '{"path": "README.md"}' | jq -r .text
  echo '{"command": "make test"}' | pml call shell:exec - --timeout 10m`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return fmt.Errorf("pml call takes TOOL and optionally ARGS_JSON (or - for stdin), got %d arguments; see pml call --help", len(args))
			}
			return nil
		},
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return toolNames(g, toComplete), cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var raw string
			if len(args) == 2 {
				raw = args[1]
			}
			// A CI step wants its result, not pml's info lines (the local
			// mode notice is pml doctor's and pml init's to say).
			if !cmd.Flags().Changed("log-level") && os.Getenv("PML_LOG_LEVEL") == "" {
				g.logLevel = "warn"
			}
			return runCall(cmd.Context(), g, args[0], raw, timeout)
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "bound the whole call, e.g. 30s or 5m (0: only sandbox.timeout applies)")
	// Flag and argument errors are usage errors (exit 2) and, like every
	// other outcome, still print the JSON line scripts parse.
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return callUsage(os.Stdout, "", err)
	})
	args := cmd.Args
	cmd.Args = func(c *cobra.Command, a []string) error {
		if err := args(c, a); err != nil {
			tool := ""
			if len(a) > 0 {
				tool = a[0]
			}
			return callUsage(os.Stdout, tool, err)
		}
		return nil
	}
	return cmd
}

// callUsage prints the usage error's JSON line and returns it for exit 2.
func callUsage(out io.Writer, tool string, err error) error {
	writeOutput(out, callOutput{Tool: tool, Outcome: outcomeOf(exitUsage), ExitCode: exitUsage, IsError: true, Text: err.Error()})
	return &exitError{exitUsage, err}
}

func writeOutput(w io.Writer, o callOutput) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(o); err != nil {
		// Structured content that cannot be encoded (it came from JSON,
		// so this should not happen): keep stdout valid JSON anyway.
		o.Structured = nil
		o.Text += fmt.Sprintf("\n(pml: the structured content could not be encoded: %v)", err)
		b.Reset()
		_ = enc.Encode(o)
	}
	_, _ = w.Write(b.Bytes())
}

// parseArgs reads ARGS: empty means {}, "-" means stdin.
func parseArgs(raw string, stdin io.Reader) (json.RawMessage, error) {
	if raw == "-" {
		data, err := io.ReadAll(io.LimitReader(stdin, maxArgs+1))
		if err != nil {
			return nil, fmt.Errorf("reading ARGS from stdin: %w", err)
		}
		if len(data) > maxArgs {
			return nil, fmt.Errorf("ARGS on stdin is larger than %d MiB", maxArgs>>20)
		}
		raw = string(data)
	}
	if strings.TrimSpace(raw) == "" {
		return json.RawMessage(`{}`), nil
	}
	const want = `ARGS must be a JSON object such as '{"path": "README.md"}'`
	var v any
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("%s; it is not valid JSON (at byte %d: %v)", want, se.Offset, se)
		}
		return nil, fmt.Errorf("%s; it is not valid JSON: %v", want, err)
	}
	if _, ok := v.(map[string]any); !ok {
		kind := "null"
		switch v.(type) {
		case []any:
			kind = "a list"
		case string:
			kind = "a string"
		case float64:
			kind = "a number"
		case bool:
			kind = "true/false"
		}
		return nil, fmt.Errorf("%s, not %s", want, kind)
	}
	return json.RawMessage(raw), nil
}

// runCall is pml call: the JSON line goes to the real stdout, which is
// reserved for it first so that nothing else can ever be printed there.
func runCall(ctx context.Context, g *globals, tool, rawArgs string, timeout time.Duration) error {
	if timeout < 0 {
		return callUsage(os.Stdout, tool, fmt.Errorf("--timeout must not be negative (got %s)", timeout))
	}
	args, err := parseArgs(rawArgs, os.Stdin)
	if err != nil {
		return callUsage(os.Stdout, tool, err)
	}
	out, err := reserveStdout()
	if err != nil {
		return callUsage(os.Stdout, tool, err)
	}
	defer out.Close()
	fail := func(code int, err error) error {
		writeOutput(out, callOutput{Tool: tool, Outcome: outcomeOf(code), ExitCode: code, IsError: true, Text: err.Error()})
		return &exitError{code, err}
	}
	e, err := g.setup()
	if err != nil {
		code := exitUsage
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
		return fail(code, err)
	}
	defer e.rt.Close()
	// TOOL may be the wire name an MCP client sees (filesystem__read_file);
	// everything from here on, the output too, uses pml's own name.
	tool = e.broker.ToolName(tool)
	reaped := e.reapInBackground(ctx)
	e.broker.StartCloud(ctx)

	cctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	res := e.broker.Call(cctx, broker.Request{Tool: tool, Args: args})
	// Whatever happened, the call's containers are gone before pml exits.
	e.broker.Close(30 * time.Second)
	select {
	case <-reaped:
	case <-time.After(5 * time.Second):
	}

	code := callExitCode(res, ctx, cctx)
	switch code {
	case exitTimeout:
		// The tool's own message may name sandbox.timeout; say which bound hit.
		res.Text = fmt.Sprintf("--timeout %s expired: the call was stopped and its container killed and removed (%s)", timeout, res.Text)
	case exitInterrupted:
		res.Text = fmt.Sprintf("interrupted: the call was stopped and its container killed and removed (%s)", res.Text)
	}
	o := callOutput{Tool: tool, Outcome: outcomeOf(code), ExitCode: code, IsError: res.IsError, Text: res.Text, Structured: res.Structured}
	writeOutput(out, o)
	if code == exitOK {
		return nil
	}
	return &exitError{code, errors.New(callSummary(e, tool, code, res))}
}

// callExitCode maps a result to the exit code table. ctx is the command's
// (cancelled by Ctrl-C), cctx the call's (also bounded by --timeout).
func callExitCode(res broker.Result, ctx, cctx context.Context) int {
	if _, ok := res.Approval(); ok {
		return exitApproval
	}
	if !res.IsError {
		return exitOK
	}
	switch {
	case ctx.Err() != nil:
		return exitInterrupted
	case errors.Is(cctx.Err(), context.DeadlineExceeded):
		return exitTimeout
	}
	return exitCodeFor(res.Err())
}

// callSummary is the stderr line for a non-zero exit; for an approval it
// says exactly what to allow, and how.
func callSummary(e *env, tool string, code int, res broker.Result) string {
	first := res.Text
	if i := strings.IndexByte(first, '\n'); i >= 0 {
		first = first[:i]
	}
	if len(first) > 500 {
		first = first[:500] + "…"
	}
	a, ok := res.Approval()
	switch {
	case code == exitTimeout || code == exitInterrupted:
		return fmt.Sprintf("call %s: %s", tool, first)
	case code != exitApproval || !ok:
		// The text may start with the outcome already (the broker's kinds
		// read "unavailable: …"): say it once.
		return fmt.Sprintf("call %s: %s: %s", tool, outcomeOf(code), strings.TrimPrefix(first, outcomeOf(code)+": "))
	}
	if a.ApprovalType == broker.ApprovalAPIKey {
		vars, _ := a.Context["variables"].([]string)
		return fmt.Sprintf("call %s: approval_required (api_key): nothing ran. Set %s in the environment or in %s, then run the call again",
			tool, strings.Join(vars, ", "), a.Context["env_file"])
	}
	return approvalHint(e.cfg, a)
}

// approvalHint tells a CI user what to put in permissions.allow. An exact
// tool name in allow wins over a wildcard in ask, but not over the same
// exact name in ask, which must be removed.
func approvalHint(cfg *config.Config, a broker.Approval) string {
	pattern, _ := a.Context["pattern"].(string)
	var b strings.Builder
	fmt.Fprintf(&b, "call %s: approval_required (%s): nothing ran; pml call never asks.\n", a.Tool, a.ApprovalType)
	if file, ok := a.Context["policy_not_trusted"].(string); ok {
		fmt.Fprintf(&b, "  %s allows it, but that content of the file is not trusted: review it and run `pml trust --yes` in %s", file, filepath.Dir(file))
		return b.String()
	}
	if pattern == a.Tool {
		fmt.Fprintf(&b, "  %q is listed in permissions.ask of %s: remove it there and add it to permissions.allow:\n", a.Tool, cfg.Path)
		fmt.Fprintf(&b, "  jq '.permissions.ask -= [%q] | .permissions.allow += [%q]' .pml.json > .pml.json.new && mv .pml.json.new .pml.json && pml trust --yes", a.Tool, a.Tool)
		return b.String()
	}
	fmt.Fprintf(&b, "  add the pattern %q to permissions.allow", a.Tool)
	if pattern != "" {
		fmt.Fprintf(&b, " (it matched %q in permissions.ask)", pattern)
	}
	if !cfg.HasFile() {
		// Without a .pml.json the built-in defaults apply; a new file
		// replaces them, so it must list the read tools too.
		allow := append(broker.DefaultPermissions().Allow, a.Tool)
		js, _ := json.Marshal(map[string]any{"permissions": map[string]any{"allow": allow}})
		fmt.Fprintf(&b, ". There is no %s yet; create it, then trust it:\n  echo '%s' > .pml.json && pml trust --yes", cfg.Path, js)
		return b.String()
	}
	fmt.Fprintf(&b, " of %s and trust the new content (it grants more):\n  jq '.permissions.allow += [%q]' .pml.json > .pml.json.new && mv .pml.json.new .pml.json && pml trust --yes", cfg.Path, a.Tool)
	return b.String()
}

// toolNames completes TOOL from the tools pml lists here (built-in, the
// configured servers' cached tools, cached cloud tools), without Docker.
func toolNames(g *globals, prefix string) []string {
	quiet := *g
	quiet.logLevel = "disabled"
	e, err := quiet.setup()
	if err != nil {
		return nil
	}
	defer e.rt.Close()
	var out []string
	for _, t := range e.broker.Tools() {
		if strings.HasPrefix(t.Name, prefix) && t.Name != broker.ContinueTool {
			out = append(out, t.Name)
		}
	}
	return out
}
