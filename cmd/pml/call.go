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
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/pml-dev/pml/broker"
	"github.com/pml-dev/pml/broker/approve"
	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/broker/permit"
	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/cmd/pml/internal/term"
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
clients see on the wire (filesystem__read_file); the output names it the first way. A tool of a capability added
with pml add (mathx:double) is callable too, as under pml run. pml call never prompts and never waits for a person: a call
that needs approval exits 3 and says what to allow.

Stdout holds exactly one line, one JSON object, and nothing else:
  {"tool": "…", "outcome": "ok", "exit_code": 0, "is_error": false, "text": "…", "structured": …}
Logs go to stderr: warnings and errors only (-D or --log-level info|debug for more).

Exit codes:
` + exitTable() + `
--timeout bounds the whole call: pml call exits within a second of it whatever the container engine
does, the removal of what a killed pml left running included. When it expires (or on Ctrl-C) the call's container is killed and removed; the text says
whether the engine confirmed that in time, and what it did not confirm is removed by the next pml start.`,
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
			return callCompletions(g, toComplete)
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
	// --timeout bounds the whole call, from the process's start.
	began := processStart
	if timeout < 0 {
		return callUsage(os.Stdout, tool, fmt.Errorf("--timeout must not be negative (got %s)", timeout))
	}
	args, err := parseArgs(rawArgs, os.Stdin)
	if err != nil {
		return callUsage(os.Stdout, tool, err)
	}
	out, err := term.ReserveStdout()
	if err != nil {
		return callUsage(os.Stdout, tool, err)
	}
	defer out.Close()
	fail := func(code int, err error) error {
		writeOutput(out, callOutput{Tool: tool, Outcome: outcomeOf(code), ExitCode: code, IsError: true, Text: err.Error()})
		return &exitError{code, err}
	}
	if timeout > 0 {
		// What runs before the call (the reap of a dead pml's
		// containers, startGuard) stops at the same bound.
		g.deadline = began.Add(timeout)
	}
	e, err := g.setup()
	if err != nil {
		code := exitUsage
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
		if ee != nil && errors.Is(ee.err, errReapCut) {
			err = fmt.Errorf("--timeout %s expired before the call started: %w", timeout, ee.err)
		}
		return fail(code, err)
	}
	defer e.rt.Close()
	// TOOL may be the wire name an MCP client sees (filesystem__read_file);
	// everything from here on, the output too, uses pml's own name.
	tool = e.broker.ToolName(tool)
	if err := answersApproval(tool, args); err != nil {
		return fail(exitUsage, err)
	}
	reaped := e.reapInBackground(ctx)
	e.broker.StartCloud(ctx)
	e.broker.LoadAddedCapabilities()

	cctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		cctx, cancel = context.WithDeadline(ctx, began.Add(timeout))
		defer cancel()
	}
	res, overran := callWithin(cctx, e.broker, call.Request{Tool: tool, Args: args})
	// Whatever happened, the call's containers are gone before pml exits;
	// after a deadline (or Ctrl-C) within what is left of its bound.
	// The reap of other pmls' leftovers is not waited for then: the
	// next start does it.
	closeBy, reapBy := 30*time.Second, 5*time.Second
	if cctx.Err() != nil {
		closeBy = max(time.Until(stoppedAt(cctx).Add(callExitGrace)), 10*time.Millisecond)
		reapBy = 0
	}
	e.broker.Close(closeBy)
	select {
	case <-reaped:
	case <-time.After(reapBy):
	}

	code := callExitCode(res, ctx, cctx)
	if overran {
		code = exitTimeout
		if ctx.Err() != nil {
			code = exitInterrupted
		}
	}
	if a, ok := res.Approval(); ok {
		res.Text = approvalText(e.cfg, a)
	}
	switch code {
	case exitTimeout:
		// The bound that hit first is --timeout (the tool's own message
		// says the caller's deadline passed, and what became of its
		// container); what it printed follows.
		res.Text = fmt.Sprintf("--timeout %s expired: the call was stopped.\n%s", timeout, res.Text)
	case exitInterrupted:
		res.Text = fmt.Sprintf("interrupted: the call was stopped.\n%s", res.Text)
	}
	o := callOutput{Tool: tool, Outcome: outcomeOf(code), ExitCode: code, IsError: res.IsError, Text: res.Text, Structured: res.Structured}
	writeOutput(out, o)
	if code == exitOK {
		return nil
	}
	return &exitError{code, errors.New(callSummary(e, tool, code, res))}
}

// processStart is when this pml started (package initialisation comes
// first): --timeout counts from it.
var processStart = time.Now()

// callOverrun is how long after its deadline (or Ctrl-C) pml call waits
// for the call to end: the call waits container.DeadlineGrace for the
// engine to confirm its container's removal, so this passes only when
// some step did not heed the deadline. callExitGrace bounds the rest
// (closing the broker, the reap of leftovers): pml call exits within a
// second of its --timeout whatever the engine does.
const (
	callOverrun   = 600 * time.Millisecond
	callExitGrace = 600 * time.Millisecond
)

// callWithin runs the call and returns its result, or, when it has not
// ended callOverrun after cctx did, a result that says so (overran): the
// call goes on in the background until pml exits.
func callWithin(cctx context.Context, b *broker.Broker, req call.Request) (call.Result, bool) {
	done := make(chan call.Result, 1)
	go func() { done <- b.Call(cctx, req) }()
	select {
	case res := <-done:
		return res, false
	case <-cctx.Done():
	}
	t := time.NewTimer(callOverrun)
	defer t.Stop()
	select {
	case res := <-done:
		return res, false
	case <-t.C:
	}
	return call.Result{IsError: true, Text: fmt.Sprintf("the call did not end within %s of being stopped (the container engine did not answer): "+
		"its container, if one had been created, may still be running; the next pml start removes it (or run pml cleanup)", callOverrun)}, true
}

// stoppedAt is when cctx ended (its deadline, or now for a
// cancellation), or now while it runs.
func stoppedAt(cctx context.Context) time.Time {
	if dl, ok := cctx.Deadline(); ok && cctx.Err() == context.DeadlineExceeded {
		return dl
	}
	return time.Now()
}

// answersApproval refuses an answer to an approval: a workflow lives in
// the process that asked it, and each pml call is a new one, so the
// broker's "unknown workflow … call the tool again" would send a CI user
// round in a circle.
func answersApproval(tool string, args json.RawMessage) error {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(args, &m)
	if _, ok := m["continue_workflow"]; !ok && tool != call.ContinueTool {
		return nil
	}
	return errors.New("pml call cannot answer an approval: an approval is answered in the session that asked it, and each pml call is a new process. " +
		"Allow the call before running it instead: the approval_required output of the call says what to allow and where")
}

// callExitCode maps a result to the exit code table. ctx is the command's
// (cancelled by Ctrl-C), cctx the call's (also bounded by --timeout).
func callExitCode(res call.Result, ctx, cctx context.Context) int {
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
func callSummary(e *env, tool string, code int, res call.Result) string {
	text := summaryLines(res.Text)
	a, ok := res.Approval()
	switch {
	case code == exitTimeout || code == exitInterrupted:
		return fmt.Sprintf("call %s: %s", tool, text)
	case code != exitApproval || !ok:
		// The text may start with the outcome already (the broker's kinds
		// read "unavailable: …"): say it once.
		return fmt.Sprintf("call %s: %s: %s", tool, outcomeOf(code), strings.TrimPrefix(text, outcomeOf(code)+": "))
	}
	return approvalHint(e.cfg, a)
}

// Bounds of the message repeated on stderr (the JSON on stdout has it
// all).
const (
	summaryMaxLines = 20
	summaryMaxBytes = 4000
)

// summaryLines is res.Text for stderr: every line of a multi-line message
// (a crashed server's "its last stderr lines:" are what says why), bounded,
// the lines after the first indented under it.
func summaryLines(text string) string {
	text = strings.TrimRight(text, "\n")
	lines := strings.Split(text, "\n")
	more := 0
	if len(lines) > summaryMaxLines {
		more = len(lines) - summaryMaxLines
		lines = lines[:summaryMaxLines]
	}
	out := strings.Join(lines, "\n  ")
	if len(out) > summaryMaxBytes {
		cut := summaryMaxBytes
		for cut > 0 && !utf8.RuneStart(out[cut]) {
			cut--
		}
		out = out[:cut] + "…"
		more = -1
	}
	switch {
	case more > 0:
		out += fmt.Sprintf("\n  … (%d more lines in the text of the JSON on stdout)", more)
	case more < 0:
		out += "\n  (the whole text is in the JSON on stdout)"
	}
	return out
}

// approvalHint is pml call's stderr block for an approval: what happened
// and what a CI user can do before running the call again.
func approvalHint(cfg *config.Config, a workflow.Approval) string {
	what, fix := approvalHelp(cfg, a)
	return fmt.Sprintf("call %s: approval_required (%s): %s\n  %s", a.Tool, a.ApprovalType, what, fix)
}

// approvalText replaces the broker's approval text in pml call's output:
// the broker's tells a model to answer with continue_workflow, which a
// pml call cannot do (the process exits; the next one starts afresh).
func approvalText(cfg *config.Config, a workflow.Approval) string {
	what, fix := approvalHelp(cfg, a)
	return fmt.Sprintf("Approval required (%s): %s\n%s\n%s", a.ApprovalType, a.Description, what, fix)
}

// cannotAsk is said of every approval pml call meets.
const cannotAsk = "pml call never asks and cannot answer an approval (each call is a new process)"

// approvalHelp says what happened and what to change so that the next
// pml call runs, for where the setting in force comes from: .pml.json,
// or a PML_ variable that replaces the file's list (then editing the file
// would change nothing).
func approvalHelp(cfg *config.Config, a workflow.Approval) (what, fix string) {
	if a.ApprovalType == approve.ApprovalNetwork {
		return networkHelp(cfg, a)
	}
	if a.ApprovalType == workflow.ApprovalAPIKey {
		return "nothing ran: the tool needs an API key that is not set.",
			fmt.Sprintf("Set %s in the environment or in %s, then run the call again", strings.Join(stringsOf(a.Context["variables"]), ", "), a.Context["env_file"])
	}
	if a.ApprovalType == workflow.ApprovalIntegrity {
		return "nothing ran: the registry serves a different version of this server than .pml/mcp.lock pinned; " + cannotAsk + ".",
			"Review the change, then accept it once in an MCP client session (pml stdio answers continue, which updates .pml/mcp.lock) and commit .pml/mcp.lock"
	}
	if a.ApprovalType == workflow.ApprovalToolChange {
		return fmt.Sprintf("nothing ran: the definition of %s is not the one accepted for this workspace (%s: %s); %s.",
				a.Tool, stringOf(a.Context["change"]), strings.Join(stringsOf(a.Context["changed"]), ", "), cannotAsk),
			fmt.Sprintf("Review the change (pml lock shows its diff), then accept it with `pml lock --accept %s` (or answer continue once in an MCP client session) and run the call again", a.Tool)
	}
	if asked := stringsOf(a.Context["asked_tools"]); len(asked) > 0 {
		return declaredHelp(cfg, a, asked)
	}
	what = "nothing ran; " + cannotAsk + ", so allow it before the call."
	if file, ok := a.Context["policy_not_trusted"].(string); ok {
		return what, fmt.Sprintf("%s allows it, but that content of the file is not trusted: review it and run `pml trust --yes` in %s", file, filepath.Dir(file))
	}
	return what, permissionFix(cfg, a.Tool, stringOf(a.Context["pattern"]))
}

// declaredHelp: a capability declares tools (tools_used) that the
// permissions ask about; its run asks once for them all, which pml call
// cannot answer, so each must be allowed before the call.
func declaredHelp(cfg *config.Config, a workflow.Approval, asked []string) (what, fix string) {
	what = fmt.Sprintf("nothing ran: %s declares (tools_used) that its code calls %s, which permissions ask about; %s, so allow them before the call.",
		a.Tool, strings.Join(asked, ", "), cannotAsk)
	perms := permit.PermissionsFrom(cfg)
	fixes := make([]string, 0, len(asked))
	for _, t := range asked {
		_, pattern := perms.Decide(t)
		fixes = append(fixes, t+": "+permissionFix(cfg, t, pattern))
	}
	return what, strings.Join(fixes, "\n  ")
}

// permissionFix says how to make tool allowed. An exact tool name in
// allow wins over a wildcard in ask, but not over the same exact name in
// ask, which must be taken out.
func permissionFix(cfg *config.Config, tool, pattern string) string {
	perms := permit.PermissionsFrom(cfg)
	allowed, _ := permit.Permissions{Allow: perms.Allow}.Decide(tool)
	allowEnv := envSource(cfg, "permissions.allow")
	if pattern == tool {
		if env := envSource(cfg, "permissions.ask"); env != "" {
			fix := fmt.Sprintf("%q is named in %s in the environment (a name in ask beats allow): take it out of that variable", tool, env)
			if allowed != call.Allow {
				fix += " and " + addToAllow(cfg, tool, allowEnv)
			}
			return fix
		}
		if allowed == call.Allow {
			fix := fmt.Sprintf("%q is listed in permissions.ask of %s, which beats its allow", tool, cfg.Path)
			if allowEnv != "" {
				fix += " (it is allowed by " + allowEnv + ")"
			}
			return fix + fmt.Sprintf(": remove it from permissions.ask and trust the new content:\n  jq '.permissions.ask -= [%q]' .pml.json > .pml.json.new && mv .pml.json.new .pml.json && pml trust --yes", tool)
		}
		if allowEnv != "" {
			return fmt.Sprintf("%q is listed in permissions.ask of %s: remove it there (jq '.permissions.ask -= [%q]' .pml.json > .pml.json.new && mv .pml.json.new .pml.json && pml trust --yes) and %s",
				tool, cfg.Path, tool, addToAllow(cfg, tool, allowEnv))
		}
		return fmt.Sprintf("%q is listed in permissions.ask of %s: remove it there and add it to permissions.allow:\n  jq '.permissions.ask -= [%q] | .permissions.allow += [%q]' .pml.json > .pml.json.new && mv .pml.json.new .pml.json && pml trust --yes", tool, cfg.Path, tool, tool)
	}
	fix := addToAllow(cfg, tool, allowEnv)
	if pattern != "" {
		fix += fmt.Sprintf(" (it matched %q in permissions.ask; an exact name in allow wins over it)", pattern)
	}
	return fix
}

// addToAllow says how to add tool to permissions.allow where the list in
// force comes from: the variable env, the file, or no file yet.
func addToAllow(cfg *config.Config, tool, env string) string {
	if env != "" {
		list := append(slices.Clone(cfg.Permissions.Allow), tool)
		return fmt.Sprintf("add %q to %s%s:\n  export %s=%s", tool, env, replacesFile(cfg, "permissions.allow"), env, shellQuote(strings.Join(list, ",")))
	}
	if !cfg.HasFile() {
		// Without a .pml.json the built-in defaults apply; a new file
		// replaces them, so it must list the read tools too.
		allow := append(permit.DefaultPermissions().Allow, tool)
		js, _ := json.Marshal(map[string]any{"permissions": map[string]any{"allow": allow}})
		return fmt.Sprintf("add the pattern %q to permissions.allow. There is no %s yet; create it, then trust it:\n  echo '%s' > .pml.json && pml trust --yes", tool, cfg.Path, js)
	}
	return fmt.Sprintf("add the pattern %q to permissions.allow of %s and trust the new content (it grants more):\n  jq '.permissions.allow += [%q]' .pml.json > .pml.json.new && mv .pml.json.new .pml.json && pml trust --yes", tool, cfg.Path, tool)
}

// networkHelp: the tool ran, and pml's egress proxy refused a connection
// its network.allow does not name. What ran before stays done.
func networkHelp(cfg *config.Config, a workflow.Approval) (what, fix string) {
	hosts := stringsOf(a.Context["hosts"])
	key := stringOf(a.Context["config_key"])
	who := stringOf(a.Context["who"])
	list := strings.Join(hosts, ", ")
	output := ""
	if _, ok := a.Context["result"]; ok {
		output = " (its output is in structured.context.result of the JSON on stdout)"
	}
	what = fmt.Sprintf("%s ran, and pml's egress proxy refused its connection to %s, which %s does not allow; the call went on without it, and what it did up to there is done%s. %s, so allow the host before running it again.",
		who, list, key, output, cannotAsk)
	if env := envSource(cfg, key); env != "" {
		cur := cfg.Sandbox.Network.Allow
		return what, fmt.Sprintf("add %s to %s%s:\n  export %s=%s", list, env, replacesFile(cfg, key), env, shellQuote(strings.Join(append(slices.Clone(cur), hosts...), ",")))
	}
	js, _ := json.Marshal(hosts)
	path := jqPath(key)
	if !cfg.HasFile() && key == "sandbox.network.allow" {
		env := "PML_SANDBOX_NETWORK_ALLOW"
		return what, fmt.Sprintf("add %s to %s (there is no %s), e.g. in the environment:\n  export %s=%s", list, key, cfg.Path, env, shellQuote(strings.Join(hosts, ",")))
	}
	return what, fmt.Sprintf("add %s to %s in %s and trust the new content:\n  jq '%s += %s' .pml.json > .pml.json.new && mv .pml.json.new .pml.json && pml trust --yes", list, key, cfg.Path, path, js)
}

// jqPath is a dotted config key as a jq path; server names may hold
// characters jq's .name form does not take.
func jqPath(key string) string {
	for _, section := range []string{"mcps.", "private_mcps."} {
		if rest, ok := strings.CutPrefix(key, section); ok {
			if name, tail, ok := strings.Cut(rest, ".network."); ok {
				js, _ := json.Marshal(name)
				return "." + strings.TrimSuffix(section, ".") + "[" + string(js) + "].network." + tail
			}
		}
	}
	return "." + key
}

// replacesFile reminds that a variable's list replaces the file's.
func replacesFile(cfg *config.Config, key string) string {
	if !cfg.HasFile() {
		return ""
	}
	return ", which replaces the file's " + key
}

// allowList names the permissions.allow in force: PML_PERMISSIONS_ALLOW,
// when set, replaces the file's.
func allowList() string {
	if os.Getenv("PML_PERMISSIONS_ALLOW") != "" {
		return "PML_PERMISSIONS_ALLOW (which replaces permissions.allow in .pml.json)"
	}
	return "permissions.allow in .pml.json"
}

// envSource is the PML_ variable key's value comes from, or "" when it
// comes from a file or pml's default.
func envSource(cfg *config.Config, key string) string {
	if s := cfg.Source(key); strings.HasPrefix(s, "PML_") {
		return s
	}
	return ""
}

func stringOf(v any) string {
	s, _ := v.(string)
	return s
}

func stringsOf(v any) []string {
	switch l := v.(type) {
	case []string:
		return l
	case []any:
		var out []string
		for _, e := range l {
			out = append(out, fmt.Sprint(e))
		}
		return out
	}
	return nil
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.,:/@+=", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// callCompletions completes pml call's TOOL from what pml knows without
// starting anything (broker.Known: the built-in tools, the configured
// servers' cached tools, the cloud's cached list) and the capabilities
// added here. Before a ':' it offers namespaces, each ending in ':' and
// without a space after (pml call every<TAB> → everything:), so that the
// next TAB lists that server's tools, even one never started here.
func callCompletions(g *globals, prefix string) ([]string, cobra.ShellCompDirective) {
	quiet := *g
	quiet.logLevel = "disabled"
	_, ws, _, err := quiet.project()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	// The servers the file names, trusted or not: a call to one not yet
	// trusted says so, with pml trust.
	k := broker.Known(ws.Dir, quiet.rawCfg)
	var extra []string
	if caps, err := tl.LoadCapabilities(ws.Dir); err == nil {
		for _, c := range caps {
			extra = append(extra, c.Namespace)
		}
	}
	return completeTool(k, extra, prefix)
}

// completeTool is callCompletions on what is known: k, and namespaces
// (capabilities) whose tools are not in it.
func completeTool(k tl.KnownTools, namespaces []string, prefix string) ([]string, cobra.ShellCompDirective) {
	if strings.Contains(prefix, ":") {
		var out []string
		for _, n := range k.Names {
			if strings.HasPrefix(n, prefix) && n != call.ContinueTool {
				out = append(out, n)
			}
		}
		sort.Strings(out)
		return out, cobra.ShellCompDirectiveNoFileComp
	}
	seen := map[string]bool{}
	var out []string
	add := func(ns string) {
		if ns != "" && strings.HasPrefix(ns, prefix) && !seen[ns] {
			seen[ns] = true
			out = append(out, ns+":")
		}
	}
	for _, n := range k.Names {
		if n == call.ContinueTool {
			continue
		}
		ns, _, _ := strings.Cut(n, ":")
		add(ns)
	}
	for _, ns := range append(append([]string{}, k.Unlisted...), namespaces...) {
		add(ns)
	}
	sort.Strings(out)
	return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
}
