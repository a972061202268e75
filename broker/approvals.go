package broker

import (
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ApprovalType says what a human is asked to approve.
type ApprovalType string

const (
	ApprovalToolPermission ApprovalType = "tool_permission"
	ApprovalDependency     ApprovalType = "dependency"
	ApprovalIntegrity      ApprovalType = "integrity"
	ApprovalAPIKey         ApprovalType = "api_key"
)

// Approval is the structured content of a result that asks a human. Every
// approval type (tool permission, dependency install, integrity change,
// missing API key) uses this one shape.
type Approval struct {
	ApprovalRequired bool           `json:"approval_required"`
	ApprovalType     ApprovalType   `json:"approval_type"`
	WorkflowID       string         `json:"workflow_id"`
	Tool             string         `json:"tool"`
	Arguments        map[string]any `json:"arguments"`
	Description      string         `json:"description"`
	Options          []string       `json:"options"`
	ExpiresAt        time.Time      `json:"expires_at"`
	Context          map[string]any `json:"context,omitempty"`
}

// Continuation is the answer a client sends back, either as the extra
// argument continue_workflow of the same tool or through the
// pml:continue_workflow tool.
type Continuation struct {
	WorkflowID string `json:"workflow_id"`
	Approved   bool   `json:"approved"`
	Always     bool   `json:"always"`
}

// Workflow errors, tested with errors.Is.
var (
	ErrWorkflowUnknown = errors.New("unknown workflow")
	ErrWorkflowUsed    = errors.New("workflow already answered")
	ErrWorkflowExpired = errors.New("workflow expired")
)

// workflow is one pending approval.
type workflow struct {
	id       string
	typ      ApprovalType
	tool     string
	args     map[string]any
	pattern  string
	created  time.Time
	expires  time.Time
	used     bool
	resolved bool // taken by a continuation and currently being answered
	// data is what the approval type needs to carry out the answer (the
	// changed registry entry of an integrity approval, a paused run).
	data any
	// outer is the tool whose run made this call (pml:execute), which
	// may answer it too.
	outer string
	// dialog: the approval was put to the person through the client's own
	// dialog (MCP elicitation), so only an answer from there counts; a
	// relayed continue_workflow (written by the model) is refused.
	dialog bool
	// outcome is the person's answer in the dialog, for the refusal.
	outcome string
}

// MaxWorkflows bounds the pending workflows of one session; beyond it the
// oldest is forgotten.
const MaxWorkflows = 1000

// Workflows holds the pending approvals of one client session, in memory.
// Safe for concurrent use.
type Workflows struct {
	mu    sync.Mutex
	ttl   time.Duration
	now   func() time.Time
	byID  map[string]*workflow
	order []string // creation order, for eviction
}

// NewWorkflows returns a store whose workflows expire after ttl.
func NewWorkflows(ttl time.Duration) *Workflows {
	if ttl <= 0 {
		ttl = 5 * time.Minute
	}
	return &Workflows{ttl: ttl, now: time.Now, byID: map[string]*workflow{}}
}

// create registers a new workflow and returns it.
func (w *Workflows) create(typ ApprovalType, tool string, args map[string]any, pattern string) *workflow {
	now := w.now()
	wf := &workflow{id: newUUID(), typ: typ, tool: tool, args: args, pattern: pattern, created: now, expires: now.Add(w.ttl)}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.byID[wf.id] = wf
	w.order = append(w.order, wf.id)
	for len(w.order) > MaxWorkflows {
		delete(w.byID, w.order[0])
		w.order = w.order[1:]
	}
	return wf
}

// take claims a workflow for answering. The tool must match. A workflow is
// answered once; release puts it back when the answer could not be applied
// (e.g. .pml.json could not be written) so the user can answer again.
func (w *Workflows) take(id, tool string) (*workflow, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wf, err := w.check(id, tool)
	if err != nil {
		return wf, err
	}
	wf.resolved = true
	return wf, nil
}

// takeRelayed claims a workflow for an answer relayed by the model
// (continue_workflow): refused for a workflow put to the person through
// the client's dialog, whatever state it is in.
func (w *Workflows) takeRelayed(id, tool string) (*workflow, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if wf, ok := w.byID[id]; ok && wf.dialog {
		return wf, dialogError(wf)
	}
	wf, err := w.check(id, tool)
	if err != nil {
		return wf, err
	}
	wf.resolved = true
	return wf, nil
}

// ErrAnsweredInDialog: a relayed answer to an approval that only the
// client's dialog may answer.
var ErrAnsweredInDialog = errors.New("answered in the client's dialog")

func dialogError(wf *workflow) error {
	if wf.outcome == "" {
		return relayRefused("this approval is being put to the person through the client's dialog and can only be answered there; the call is not run")
	}
	return relayRefused(fmt.Sprintf("this approval was put to the client's dialog and ended there: %s; the call is not run", wf.outcome))
}

// relayRefused is an ErrAnsweredInDialog that reads as its message alone.
type relayRefused string

func (e relayRefused) Error() string        { return string(e) }
func (e relayRefused) Is(target error) bool { return target == ErrAnsweredInDialog }

// toDialog marks a workflow as put to the person through the client's
// dialog; on is false when it could not be shown there after all.
func (w *Workflows) toDialog(wf *workflow, on bool) {
	w.mu.Lock()
	wf.dialog = on
	w.mu.Unlock()
}

// settled records the dialog's answer (for later refusals) and ends the
// workflow when the answer ran nothing.
func (w *Workflows) settled(wf *workflow, outcome string, end bool) {
	w.mu.Lock()
	wf.outcome = outcome
	if end {
		wf.used = true
	}
	w.mu.Unlock()
}

// check finds an answerable workflow; w.mu is held.
func (w *Workflows) check(id, tool string) (*workflow, error) {
	wf, ok := w.byID[id]
	switch {
	case !ok:
		return nil, fmt.Errorf("%w %q: it was never issued in this session or was forgotten; call the tool again to get a new one", ErrWorkflowUnknown, id)
	case wf.used || wf.resolved:
		return nil, fmt.Errorf("%w: workflow %s was already answered; call the tool again to get a new one", ErrWorkflowUsed, id)
	case w.now().After(wf.expires):
		wf.used = true
		return wf, fmt.Errorf("%w: workflow %s expired at %s (approvals are valid for %s); call the tool again", ErrWorkflowExpired, id, wf.expires.UTC().Format(time.RFC3339), w.ttl)
	case tool != "" && tool != wf.tool && tool != wf.outer:
		return nil, fmt.Errorf("workflow %s belongs to %s, not %s: answer it with the same tool (or pml:continue_workflow)", id, wf.tool, tool)
	}
	return wf, nil
}

// attach ties a pending workflow to the run of outer that made the call:
// the run's tool may answer it, and pc (which keeps the workflow's own
// data) rides along. nil when the workflow is not pending here.
func (w *Workflows) attach(id, outer string, pc *pausedCall) *workflow {
	w.mu.Lock()
	defer w.mu.Unlock()
	wf, ok := w.byID[id]
	if !ok || wf.used || wf.resolved {
		return nil
	}
	pc.inner = wf.data
	wf.data = pc
	wf.outer = outer
	return wf
}

// finish marks a taken workflow as used for good.
func (w *Workflows) finish(wf *workflow) {
	w.mu.Lock()
	wf.used = true
	w.mu.Unlock()
}

// pending reports whether wf can still be answered (released after an
// answer that could not be applied).
func (w *Workflows) pending(wf *workflow) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !wf.used && !wf.resolved
}

// release makes a taken workflow answerable again.
func (w *Workflows) release(wf *workflow) {
	w.mu.Lock()
	wf.resolved = false
	w.mu.Unlock()
}

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
