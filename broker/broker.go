// Package broker is pml's request path. A tool call comes in, is resolved
// to a tool, checked against the permissions, executed in a container, and
// its result returned:
//
//	Call → resolve → permission → execute (toolbox / shell container) → Result
//
// The broker knows nothing of Docker: it speaks to a container.Runtime.
// The MCP surface (mcp.go) is a thin layer that maps tools/list and
// tools/call onto Tools and Call.
package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/images"
	"github.com/pml-dev/pml/internal/audit"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/deps"
	"github.com/pml-dev/pml/internal/protect"
	"github.com/pml-dev/pml/internal/safefs"
	"github.com/pml-dev/pml/internal/toolbox"
	"github.com/pml-dev/pml/policies"
)

// Tool is what the client sees in tools/list.
type Tool struct {
	Name        string
	Description string
	InputSchema json.RawMessage
}

// Result is the outcome of one call, independent of the MCP wire format.
type Result struct {
	// Text is the content a person (or model) reads.
	Text string
	// Structured is optional machine-readable output.
	Structured any
	// IsError marks a failed call: a tool error, a refusal, a timeout.
	IsError bool
	// blocked: a path argument was refused (audited as path_blocked).
	blocked bool
	// upstream is a server tool's result as the server sent it (all its
	// content blocks), passed on unchanged.
	upstream *mcp.CallToolResult
	// err is the failure behind an error result made by pml itself (not
	// a tool's own error), for callers that map kinds to exit codes.
	err error
}

// Err returns the failure behind an error result pml made itself, to be
// tested with errors.Is against ErrDenied, ErrUnavailable, ErrCloud,
// ErrNotFound, ErrInvalidInput; nil for successes and tools' own errors.
func (r Result) Err() error { return r.err }

// Approval returns the approval a result asks for, if it asks.
func (r Result) Approval() (Approval, bool) {
	a, ok := r.Structured.(Approval)
	return a, ok && !r.IsError
}

// Options configure a Broker.
type Options struct {
	// Workspace is the absolute, symlink-free workspace directory.
	Workspace string
	Config    *config.Config
	Runtime   container.Runtime
	// Exe is the pml executable the toolbox image is built from.
	Exe string
	// Owner labels every container (defaults to container.Self()).
	Owner  *container.Owner
	Logger zerolog.Logger
	// ServerStartTimeout overrides how long a stdio server may take to
	// start and initialize (tests).
	ServerStartTimeout time.Duration
	// HTTPClient talks to the cloud (and registries); nil: a default one.
	HTTPClient *http.Client
}

// Broker routes and executes tool calls. Safe for concurrent use.
type Broker struct {
	ws      string
	cfg     *config.Config
	rt      container.Runtime
	perms   Permissions
	policy  policies.Policy
	user    string
	owner   container.Owner
	toolbox *images.Toolbox
	log     zerolog.Logger
	tools   map[string]toolEntry
	order   []string
	audit   *audit.Log

	mu sync.RWMutex // guards perms

	// toolsMu guards tools, order and toolListeners: server tools are
	// registered at run time.
	toolsMu       sync.RWMutex
	toolListeners []func(added []Tool, removed []string)

	servers            map[string]*server
	serverOrder        []string
	deps               *deps.Store
	toolsCache         *toolsCache
	serverStartTimeout time.Duration

	cloud    *cloudSide
	registry *registrySide
	// guard watches pml's own files that a container could create
	// (internal/protect); session holds the long-lived servers' exposures.
	guard   *protect.Guard
	session sessionGuard
	// supervisorExe is pml's executable when shell:exec can run it as
	// its container's PID 1 (see supervisor).
	supervisorOnce sync.Once
	supervisorExe  string
	// serversMu guards servers and serverOrder: registry servers are
	// added at run time.
	serversMu sync.RWMutex

	// base is cancelled by Close: every running call is cancelled with it,
	// which kills its container; inflight lets Close wait for the cleanup.
	base       context.Context
	cancelBase context.CancelFunc
	inflight   sync.WaitGroup

	// pool holds pre-started single-use containers: toolbox, shell and
	// per_call servers. Close closes it.
	pool *container.Pool
}

type toolEntry struct {
	def toolbox.Tool
	run func(b *Broker, ctx context.Context, def toolbox.Tool, args map[string]any) Result
}

// New builds a broker. It starts no container and does not contact the
// runtime: initialize and tools/list never wait for Docker.
func New(o Options) (*Broker, error) {
	if o.Config == nil {
		return nil, errors.New("broker: no configuration")
	}
	// A .pml that is a link or a file would get pml's audit log and state
	// wherever it points: refused before anything is built.
	if err := safefs.CheckStateDir(o.Workspace); err != nil {
		return nil, err
	}
	owner := container.Self()
	if o.Owner != nil {
		owner = *o.Owner
	}
	pol, err := effectivePolicy(o.Config.Sandbox)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.Config.Path, err)
	}
	// Every container of this pml starts through one cap (see
	// container.Limited); o.Runtime itself is kept for image work only.
	var rt container.Runtime
	var limited *container.Limited
	if o.Runtime != nil {
		limited = container.Limit(o.Runtime, o.Config.Sandbox.MaxContainers)
		rt = limited
	}
	b := &Broker{
		ws:      o.Workspace,
		cfg:     o.Config,
		rt:      rt,
		perms:   PermissionsFrom(o.Config),
		policy:  pol,
		user:    chooseUser(o.Config.Sandbox.User, o.Workspace),
		owner:   owner,
		toolbox: &images.Toolbox{Runtime: o.Runtime, Exe: o.Exe},
		log:     o.Logger,
		tools:   map[string]toolEntry{},
		audit:   audit.New(filepath.Join(o.Workspace, ".pml", "audit.jsonl")),
	}
	b.pool = container.NewPool(container.PoolOptions{Runtime: rt, Min: o.Config.Sandbox.Pool.Min,
		Max: o.Config.Sandbox.Pool.Max, Idle: o.Config.Sandbox.IdleTimeout, Logger: o.Logger})
	if limited != nil {
		limited.SetReclaim(b.pool.Reclaim)
	}
	// .pml/ always exists, so that containers that may write the
	// workspace get it read-only (see workspaceMounts); never through a
	// link (checked above).
	_ = safefs.MkdirAll(o.Workspace, ".pml", 0o755)
	b.guard = protect.New(o.Workspace, owner.Labels(), o.Logger)
	b.base, b.cancelBase = context.WithCancel(context.Background())
	for _, t := range toolbox.Filesystem {
		b.add(t, (*Broker).runToolbox)
	}
	b.add(shellTool, (*Broker).runShell)
	b.toolsCache = &toolsCache{path: filepath.Join(o.Workspace, ".pml", "tools-cache.json")}
	b.serverStartTimeout = o.ServerStartTimeout
	b.setupServers()
	b.setupCloud(o)
	b.setupRegistry()
	return b, nil
}

func (b *Broker) add(t toolbox.Tool, run func(*Broker, context.Context, toolbox.Tool, map[string]any) Result) {
	b.tools[t.Name] = toolEntry{def: t, run: run}
	b.order = append(b.order, t.Name)
}

// Close cancels every running call (killing its container) and returns
// within timeout: the calls' own cleanup gets two thirds of it, then a
// sweep by owner label removes whatever this pml still has, whatever the
// rest is doing (a call stuck on the daemon cannot hold pml's exit).
func (b *Broker) Close(timeout time.Duration) {
	b.cancelBase()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	graceful := make(chan struct{})
	go func() {
		// Closing the pool first stops refills while the cancelled calls
		// wind down; it returns once their containers are removed too.
		_ = b.pool.Close(ctx)
		b.inflight.Wait()
		b.closeServers()
		close(graceful)
	}()
	select {
	case <-graceful:
	case <-time.After(timeout * 2 / 3):
		b.log.Warn().Msg("some calls did not finish cleaning up in time; removing this pml's containers by label")
	}
	swept := true
	if b.rt != nil {
		if n, err := container.RemoveOwn(ctx, b.rt, b.owner); err != nil {
			swept = false
			b.log.Warn().Err(err).Msg("final sweep of this pml's containers; the next pml start removes what is left")
		} else if n > 0 {
			b.log.Info().Int("removed", n).Msg("removed containers whose removal had not finished")
		}
	}
	// Every container is gone: the last look at pml's own files. When
	// some may remain, their exposures stay journaled for the next start.
	if swept {
		b.releaseSession()
	}
	b.guard.Close()
}

// Workspace returns the workspace directory.
func (b *Broker) Workspace() string { return b.ws }

// User returns the uid:gid containers run as.
func (b *Broker) User() string { return b.user }

// Policy returns the effective container policy.
func (b *Broker) Policy() policies.Policy { return b.policy }

// Tools lists every tool, in a stable order, ending with
// pml:continue_workflow.
func (b *Broker) Tools() []Tool {
	b.toolsMu.RLock()
	defer b.toolsMu.RUnlock()
	out := make([]Tool, 0, len(b.order)+1)
	for _, n := range b.order {
		d := b.tools[n].def
		out = append(out, Tool{Name: d.Name, Description: d.Description, InputSchema: d.InputSchema})
	}
	return append(out, continueTool)
}

var continueTool = Tool{
	Name: ContinueTool,
	Description: "Answer a pending approval (a result with approval_required) for clients that cannot resend the original call: " +
		"approved runs the stored call, always also adds the tool to permissions.allow in .pml.json.",
	InputSchema: json.RawMessage(`{
  "type": "object",
  "properties": {
    "workflow_id": {"type": "string", "description": "The workflow_id of the approval_required result."},
    "approved": {"type": "boolean", "description": "true runs the call, false aborts it."},
    "always": {"type": "boolean", "description": "Also allow this tool from now on (saved in .pml.json)."}
  },
  "required": ["workflow_id", "approved"]
}`),
}

// Request is one tool call as the MCP layer hands it over.
type Request struct {
	Tool string
	Args json.RawMessage
	// Workflows holds the calling session's pending approvals.
	Workflows *Workflows
	// Ask, when set, asks the human right away (MCP elicitation). It
	// returns "continue", "always" or "abort", or what else the person did
	// there ("declined", "cancelled", "not answered"), which is final; shown
	// is false when the question never reached the person (the client
	// failed the request): then the call returns approval_required.
	Ask func(ctx context.Context, a Approval) (choice string, shown bool)
	// Dialog: the client answers approvals in its own dialog through input
	// requests (multi round-trip); every approval result becomes one.
	Dialog bool
	// Elicited, when set, is a person's answer to a workflow of this tool,
	// given through the client's elicitation UI; Args are then ignored.
	Elicited *Elicited
}

// Elicited is an answer from the client's elicitation UI.
type Elicited struct {
	WorkflowID string
	// Choice is "continue", "always" or "abort"; else what the person did
	// instead ("declined", "cancelled", "not answered"), which ends the
	// workflow.
	Choice string
}

// ContinueTool is the tool clients that cannot resend a call use to answer
// an approval.
const ContinueTool = "pml:continue_workflow"

// Call runs one tool call through the request path. It never returns a Go
// error: every failure is a Result with IsError and a readable message.
func (b *Broker) Call(ctx context.Context, req Request) Result {
	began := time.Now()
	b.inflight.Add(1)
	defer b.inflight.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(b.base, cancel)()
	name := req.Tool
	if req.Workflows == nil {
		req.Workflows = NewWorkflows(b.cfg.HIL.Timeout)
	}
	ctx = context.WithValue(ctx, requestKey{}, req)
	args := map[string]any{}
	if len(req.Args) > 0 && string(req.Args) != "null" {
		if err := json.Unmarshal(req.Args, &args); err != nil {
			b.record(audit.Entry{Tool: name, Decision: audit.Failed, Reason: "arguments are not a JSON object"}, began)
			return errorResult(fmt.Errorf("%w: the arguments of %s must be a JSON object: %v", ErrInvalidInput, name, err))
		}
	}
	if name == ContinueTool {
		cont, err := parseContinuation(args)
		if err != nil {
			return errorResult(err)
		}
		return b.continueWorkflow(ctx, req, cont, "", began)
	}
	if req.Elicited != nil {
		return b.elicited(ctx, req, name, began)
	}
	// The continuation argument is pml's, not the tool's: take it out
	// before the tool sees its arguments. The workflow names its tool, so
	// this needs nothing resolved (a registry tool may not be loaded yet).
	if raw, ok := args["continue_workflow"]; ok {
		delete(args, "continue_workflow")
		cont, err := parseContinuation(raw)
		if err != nil {
			return errorResult(err)
		}
		return b.continueWorkflow(ctx, req, cont, name, began)
	}
	b.toolsMu.RLock()
	_, known := b.tools[name]
	b.toolsMu.RUnlock()
	srv := b.serverOf(name)
	cloudTool := !known && b.isCloudTool(name)
	if !known && srv == nil && !cloudTool {
		if !registryCandidate(name) || !b.registryLookups() {
			b.record(audit.Entry{Tool: name, Decision: audit.Failed, Reason: "no such tool"}, began)
			return errorResult(fmt.Errorf("%w %q: tools/list shows the available tools", ErrNotFound, name))
		}
		// Denied tools are refused before anything is fetched.
		if d, p := b.decide(name); d == Deny {
			return b.denied(name, p, args, began)
		}
		change, err := b.resolveFromRegistry(ctx, name)
		if err != nil {
			b.record(audit.Entry{Tool: name, Decision: audit.Failed, Reason: "registry", ArgKeys: audit.Keys(args)}, began)
			return errorResult(err)
		}
		if change != nil {
			_, p := b.decide(name)
			if res, refused := b.needsDialog(req, name, p, args, began); refused {
				return res
			}
			wf := req.Workflows.create(ApprovalIntegrity, name, args, p)
			wf.data = change
			b.record(audit.Entry{Tool: name, Decision: audit.Asked, Pattern: p, WorkflowID: wf.id, Reason: "integrity changed", ArgKeys: audit.Keys(args)}, began)
			return b.askInDialog(ctx, req, wf, b.approvalFor(wf), began)
		}
		srv = b.serverOf(name)
		cloudTool = b.isCloudTool(name)
	}

	decision, pattern := b.decide(name)
	// A server that is not installed yet needs its install approved
	// first, unless its tools are allowed outright.
	needsInstall := srv != nil && !b.deps.Installed(srv.cfg)
	// A cloud tool whose API key is missing asks the human to set it.
	cloudish := b.isCloudTool(name)
	var missingKeys []string
	if decision != Deny && cloudish {
		// The keys a cloud tool needs come with the cloud's tool list: a
		// call right after start (pml call, a fast client) waits for it
		// as tools/list does, so no key is left out.
		b.waitCloud(ctx)
		_, missingKeys = b.byokFor(name)
	}
	switch {
	case decision == Deny:
		return b.denied(name, pattern, args, began)
	case cloudish && !b.cloud.client.Enabled():
		// Local mode: asking a person to approve a call that cannot run
		// would only waste their answer.
		res := b.runCloudTool(ctx, toolbox.Tool{Name: name}, args)
		b.record(audit.Entry{Tool: name, Decision: audit.Failed, Pattern: pattern, Reason: "local mode", ArgKeys: audit.Keys(args)}, began)
		return res
	case decision == Ask || needsInstall && decision != Allow || len(missingKeys) > 0:
		typ := ApprovalToolPermission
		switch {
		case needsInstall:
			typ = ApprovalDependency
		case len(missingKeys) > 0 && decision != Ask:
			typ = ApprovalAPIKey
		}
		if res, refused := b.needsDialog(req, name, pattern, args, began); refused {
			return res
		}
		wf := req.Workflows.create(typ, name, args, pattern)
		approval := b.approvalFor(wf)
		b.record(audit.Entry{Tool: name, Decision: audit.Asked, Pattern: pattern, WorkflowID: wf.id, ArgKeys: audit.Keys(args)}, began)
		return b.askInDialog(ctx, req, wf, approval, began) // dialog.go
	}
	return b.runTool(ctx, name, args, audit.Allowed, pattern, "", began)
}

// denied refuses a call that a deny pattern matches, and audits it.
func (b *Broker) denied(name, pattern string, args map[string]any, began time.Time) Result {
	b.record(audit.Entry{Tool: name, Decision: audit.Denied, Pattern: pattern, ArgKeys: audit.Keys(args)}, began)
	return errorResult(fmt.Errorf("%w: %s matches the deny pattern %q in %s; remove it from permissions.deny to use this tool", ErrDenied, name, pattern, b.permSource()))
}

// runTool installs what a server tool needs, finds the tool and executes it.
func (b *Broker) runTool(ctx context.Context, name string, args map[string]any, decision, pattern, workflowID string, began time.Time) Result {
	if srv := b.serverOf(name); srv != nil && !b.deps.Installed(srv.cfg) {
		if err := b.install(ctx, srv); err != nil {
			b.record(audit.Entry{Tool: name, Decision: audit.Failed, Pattern: pattern, WorkflowID: workflowID, Reason: "install failed", ArgKeys: audit.Keys(args)}, began)
			return errorResult(err)
		}
	}
	if b.isCloudTool(name) && !b.hasTool(name) {
		// Not (yet) in the cloud's list: forward it anyway and let the
		// cloud answer whether it knows the tool.
		return b.execute(ctx, toolEntry{def: toolbox.Tool{Name: name}, run: (*Broker).runCloudTool}, args, decision, pattern, workflowID, began)
	}
	entry, err := b.lookup(ctx, name)
	if err != nil {
		b.record(audit.Entry{Tool: name, Decision: audit.Failed, Pattern: pattern, WorkflowID: workflowID, Reason: "no such tool", ArgKeys: audit.Keys(args)}, began)
		return errorResult(err)
	}
	return b.execute(ctx, entry, args, decision, pattern, workflowID, began)
}

// approvalFor describes a workflow by its type.
func (b *Broker) approvalFor(wf *workflow) Approval {
	switch wf.typ {
	case ApprovalAPIKey:
		return b.apiKeyApproval(wf)
	case ApprovalIntegrity:
		return b.integrityApproval(wf)
	}
	if wf.typ == ApprovalDependency {
		if srv := b.serverOf(wf.tool); srv != nil && srv.cfg.Install != nil {
			return b.dependencyApproval(wf, srv)
		}
	}
	return b.approval(wf)
}

// execute runs an allowed call and records its outcome.
func (b *Broker) execute(ctx context.Context, entry toolEntry, args map[string]any, decision, pattern, workflowID string, began time.Time) Result {
	keys := audit.Keys(args)
	res := entry.run(b, ctx, entry.def, args)
	status := "ok"
	if res.IsError {
		status = "error"
	}
	if res.blocked {
		decision = audit.PathBlocked
	}
	b.record(audit.Entry{Tool: entry.def.Name, Decision: decision, Pattern: pattern, WorkflowID: workflowID, ExitStatus: status, ArgKeys: keys}, began)
	return res
}

// continueWorkflow applies an answer relayed by the model
// (continue_workflow): the seeds' channel for clients without elicitation.
// It is refused for a workflow put to the person through the client's own
// dialog, and altogether under hil.require_elicitation.
func (b *Broker) continueWorkflow(ctx context.Context, req Request, c Continuation, tool string, began time.Time) Result {
	wf, err := req.Workflows.takeRelayed(c.WorkflowID, tool)
	if err == nil && b.cfg.HIL.RequireElicitation {
		req.Workflows.finish(wf)
		err = errRelayOff
	}
	if err != nil {
		b.refusedAnswer(tool, c.WorkflowID, wf, err, began)
		return errorResult(err)
	}
	return b.answer(ctx, req.Workflows, wf, c.Approved, c.Always, began)
}

// refusedAnswer audits an answer that was not applied.
func (b *Broker) refusedAnswer(tool, id string, wf *workflow, err error, began time.Time) {
	if wf != nil {
		tool = wf.tool
	}
	switch {
	case errors.Is(err, ErrAnsweredInDialog) || errors.Is(err, errRelayOff):
		b.record(audit.Entry{Tool: tool, Decision: audit.Rejected, WorkflowID: id, Reason: "relayed answer refused"}, began)
	case errors.Is(err, ErrWorkflowExpired):
		b.record(audit.Entry{Tool: tool, Decision: audit.Expired, WorkflowID: id}, began)
	default:
		b.record(audit.Entry{Tool: tool, Decision: audit.Failed, WorkflowID: id, Reason: "continuation refused"}, began)
	}
}

// elicited applies an answer given in the client's elicitation UI (multi
// round-trip). An answer other than continue or always (abort, decline,
// cancel) is final: the workflow ends and nothing runs.
func (b *Broker) elicited(ctx context.Context, req Request, tool string, began time.Time) Result {
	e := req.Elicited
	wf, err := req.Workflows.take(e.WorkflowID, tool)
	if err != nil {
		b.refusedAnswer(tool, e.WorkflowID, wf, err, began)
		return errorResult(err)
	}
	return b.dialogAnswer(ctx, req.Workflows, wf, e.Choice, began)
}

// answer runs (or aborts) a workflow that take has claimed.
func (b *Broker) answer(ctx context.Context, wfs *Workflows, wf *workflow, approved, always bool, began time.Time) Result {
	if pc, ok := wf.data.(*pausedCall); ok {
		return b.resumeRun(ctx, wfs, wf, pc, approved, always, began)
	}
	keys := audit.Keys(wf.args)
	if !approved {
		wfs.finish(wf)
		b.record(audit.Entry{Tool: wf.tool, Decision: audit.Rejected, WorkflowID: wf.id, ArgKeys: keys}, began)
		return Result{
			Text:       fmt.Sprintf("Rejected: %s was not run.", wf.tool),
			Structured: map[string]any{"status": "rejected", "workflow_id": wf.id, "tool": wf.tool},
			IsError:    true,
		}
	}
	decision := audit.Approved
	if wf.typ == ApprovalIntegrity {
		wfs.finish(wf)
		b.record(audit.Entry{Tool: wf.tool, Decision: audit.Approved, WorkflowID: wf.id, Reason: "integrity change approved", ArgKeys: keys}, began)
		return b.approveIntegrity(ctx, wfs, wf)
	}
	if always {
		if why := b.alwaysBlocked(wf.tool); why != "" {
			wfs.release(wf)
			b.record(audit.Entry{Tool: wf.tool, Decision: audit.Failed, WorkflowID: wf.id, Reason: "always cannot be kept"}, began)
			return errorResult(fmt.Errorf("%w: \"always\" is not offered for %s: %s. The call was not run; answer again with always: false to run it once", ErrInvalidInput, wf.tool, why))
		}
		// Save first, run after: if the file cannot be written the call
		// has not run, and the user can answer again without "always".
		if err := b.allowAlways(wf.tool); err != nil {
			wfs.release(wf)
			b.record(audit.Entry{Tool: wf.tool, Decision: audit.Failed, WorkflowID: wf.id, Reason: "could not save always"}, began)
			return errorResult(fmt.Errorf("could not remember \"always\" for %s: %v. The call was not run; answer again with always: false to run it once", wf.tool, err))
		}
		decision = audit.Always
	}
	wfs.finish(wf)
	return b.runTool(ctx, wf.tool, wf.args, decision, wf.pattern, wf.id, began)
}

// approval describes a workflow for the client.
func (b *Broker) approval(wf *workflow) Approval {
	desc := fmt.Sprintf("Allow pml to run %s%s?", wf.tool, describeArgs(wf.args))
	options := []string{"continue", "always", "abort"}
	ctx := map[string]any{"pattern": wf.pattern, "workspace": b.ws}
	if why := b.alwaysBlocked(wf.tool); why != "" {
		options = []string{"continue", "abort"}
		ctx["always_not_offered"] = why
	}
	desc += b.describeAccess(wf.tool, ctx) // access.go
	return Approval{
		ApprovalRequired: true,
		ApprovalType:     wf.typ,
		WorkflowID:       wf.id,
		Tool:             wf.tool,
		Arguments:        wf.args,
		Description:      desc,
		Options:          options,
		ExpiresAt:        wf.expires.UTC(),
		Context:          ctx,
	}
}

// approvalResult is a normal tool result (not an error) that asks.
func approvalResult(a Approval) Result {
	always := ""
	if slices.Contains(a.Options, "always") {
		always = fmt.Sprintf("\"always\" adds %s to permissions.allow in .pml.json (and takes the exact name out of permissions.ask). ", a.Tool)
	} else if why, ok := a.Context["always_not_offered"].(string); ok {
		always = fmt.Sprintf("\"always\" is not offered: %s. ", why)
	}
	text := fmt.Sprintf("Approval required (%s): %s\n"+
		"To answer, call %s again with the extra argument continue_workflow: {\"workflow_id\": %q, \"approved\": true|false, \"always\": true|false}, "+
		"or call %s with {\"workflow_id\": %q, \"approved\": ..., \"always\": ...}. "+
		"%sThis request expires at %s.",
		a.ApprovalType, a.Description, a.Tool, a.WorkflowID, ContinueTool, a.WorkflowID, always, a.ExpiresAt.Format(time.RFC3339))
	return Result{Text: text, Structured: a}
}

// describeArgs names the main target of a call for a one-sentence prompt.
func describeArgs(args map[string]any) string {
	for _, k := range []string{"command", "path", "source", "paths"} {
		if v, ok := args[k]; ok {
			s := fmt.Sprint(v)
			if len(s) > 200 {
				s = s[:200] + "…"
			}
			return fmt.Sprintf(" with %s %s", k, s)
		}
	}
	return ""
}

func parseContinuation(raw any) (Continuation, error) {
	js, _ := json.Marshal(raw)
	var c Continuation
	if err := json.Unmarshal(js, &c); err != nil || c.WorkflowID == "" {
		return c, fmt.Errorf("%w: continue_workflow must be {\"workflow_id\": \"…\", \"approved\": true|false, \"always\": true|false}", ErrInvalidInput)
	}
	return c, nil
}

// decide reads the current permissions (they change when a user answers
// "always").
func (b *Broker) decide(tool string) (Decision, string) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.perms.Decide(tool)
}

// allowAlways persists tool in permissions.allow and applies it at once.
// Without a .pml.json, the file is first created with the built-in
// defaults, so saving one answer does not take the defaults away.
func (b *Broker) allowAlways(tool string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	inAsk := contains(b.perms.Ask, tool)
	err := b.writeConfig(func(old []byte) ([]byte, error) {
		if old == nil {
			old = config.WithPermissions(b.perms.Allow, b.perms.Ask, b.perms.Deny)
		}
		// An exact name in ask beats allow (permissions.go): it leaves
		// ask, or the next call would ask again.
		save := config.AddAllowData
		if inAsk {
			save = config.MoveToAllowData
		}
		out, err := save(b.cfg.Path, old, tool)
		if out == nil && err == nil {
			out = old // nothing to change
		}
		return out, err
	})
	if err != nil {
		return err
	}
	b.perms.Allow = append(append([]string(nil), b.perms.Allow...), tool)
	if inAsk {
		b.perms.Ask = slices.DeleteFunc(slices.Clone(b.perms.Ask), func(s string) bool { return s == tool })
	}
	return nil
}

// record appends to the audit log; a failing audit log is logged, never
// fatal to the call.
func (b *Broker) record(e audit.Entry, began time.Time) {
	e.DurationMS = time.Since(began).Milliseconds()
	ev := b.log.Info()
	if e.Decision == audit.Denied || e.Decision == audit.PathBlocked || e.Decision == audit.Failed {
		ev = b.log.Warn()
	}
	ev.Str("tool", e.Tool).Str("decision", e.Decision).Str("pattern", e.Pattern).Str("workflow_id", e.WorkflowID).Int64("ms", e.DurationMS).Str("status", e.ExitStatus).Msg("tool call")
	if err := b.audit.Record(e); err != nil {
		b.log.Error().Err(err).Msg("writing the audit log")
	}
}

func (b *Broker) permSource() string {
	if b.cfg.Exists {
		return b.cfg.Path
	}
	return "pml's defaults (no .pml.json)"
}

func errorResult(err error) Result {
	return resultFor(err)
}

// effectivePolicy applies the user's sandbox.* settings to the default
// policy. These are explicit user choices, so they may loosen it.
func effectivePolicy(s config.Sandbox) (policies.Policy, error) {
	p := policies.Default()
	if s.Memory != "" {
		p.Resources.Memory = s.Memory
	}
	if s.CPUs > 0 {
		p.Resources.CPUs = s.CPUs
	}
	if s.Pids > 0 {
		p.Resources.Pids = s.Pids
	}
	if s.Timeout > 0 {
		p.Timeout = policies.Duration(s.Timeout)
	}
	return p, p.Validate()
}

// chooseUser applies container.ChooseUser with this process and the
// workspace owner.
func chooseUser(explicit, ws string) string {
	owner := container.Nobody
	if st, err := os.Stat(ws); err == nil {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			owner = container.Ident{UID: int(sys.Uid), GID: int(sys.Gid)}
		}
	}
	return container.ChooseUser(explicit, container.Ident{UID: os.Geteuid(), GID: os.Getegid()}, owner)
}

// labels are the labels of a container started for purpose.
func (b *Broker) labels(purpose string) map[string]string {
	l := b.owner.Labels()
	l[container.LabelWorkspace] = b.ws
	l[container.LabelPurpose] = purpose
	return l
}
