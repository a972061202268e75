package workflow

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
	// ApprovalRegistryGrant: a registry entry asks for host variables,
	// network or an image of its choice that the person has not granted
	// (broker's registry_grant.go); asked whatever the tool's permission.
	ApprovalRegistryGrant ApprovalType = "registry_grant"
	// ApprovalToolChange: a server's tool is not the one pinned (its
	// definition changed, or it is new: internal/toolpin); accepting pins
	// what the approval showed.
	ApprovalToolChange ApprovalType = "tool_change"
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

// Workflow is one pending approval.
type Workflow struct {
	ID       string
	Type     ApprovalType
	Tool     string
	Args     map[string]any
	Pattern  string
	created  time.Time
	Expires  time.Time
	used     bool
	resolved bool // taken by a continuation and currently being answered
	// Data is what the approval type needs to carry out the answer (the
	// changed registry entry of an integrity approval, a paused run).
	Data any
	// Outer is the tool whose run made this call (pml:execute), which
	// may answer it too.
	Outer string
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
	byID  map[string]*Workflow
	order []string // creation order, for eviction
}

// NewWorkflows returns a store whose workflows expire after ttl.
func NewWorkflows(ttl time.Duration) *Workflows {
	if ttl <= 0 {
		ttl = 5 * time.Minute
	}
	return &Workflows{ttl: ttl, now: time.Now, byID: map[string]*Workflow{}}
}

// Create registers a new workflow and returns it.
func (w *Workflows) Create(typ ApprovalType, tool string, args map[string]any, pattern string) *Workflow {
	now := w.now()
	wf := &Workflow{ID: newUUID(), Type: typ, Tool: tool, Args: args, Pattern: pattern, created: now, Expires: now.Add(w.ttl)}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.byID[wf.ID] = wf
	w.order = append(w.order, wf.ID)
	for len(w.order) > MaxWorkflows {
		delete(w.byID, w.order[0])
		w.order = w.order[1:]
	}
	return wf
}

// Take claims a workflow for answering. The tool must match. A workflow is
// answered once; release puts it back when the answer could not be applied
// (e.g. .pml.json could not be written) so the user can answer again.
func (w *Workflows) Take(id, tool string) (*Workflow, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wf, err := w.check(id, tool)
	if err != nil {
		return wf, err
	}
	wf.resolved = true
	return wf, nil
}

// TakeRelayed claims a workflow for an answer relayed by the model
// (continue_workflow): refused for a workflow put to the person through
// the client's dialog, whatever state it is in.
func (w *Workflows) TakeRelayed(id, tool string) (*Workflow, error) {
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

func dialogError(wf *Workflow) error {
	if wf.outcome == "" {
		return RelayRefused("this approval is being put to the person through the client's dialog and can only be answered there; the call is not run")
	}
	return RelayRefused(fmt.Sprintf("this approval was put to the client's dialog and ended there: %s; the call is not run", wf.outcome))
}

// RelayRefused is an ErrAnsweredInDialog that reads as its message alone.
type RelayRefused string

func (e RelayRefused) Error() string        { return string(e) }
func (e RelayRefused) Is(target error) bool { return target == ErrAnsweredInDialog }

// ToDialog marks a workflow as put to the person through the client's
// dialog; on is false when it could not be shown there after all.
func (w *Workflows) ToDialog(wf *Workflow, on bool) {
	w.mu.Lock()
	wf.dialog = on
	w.mu.Unlock()
}

// Settled records the dialog's answer (for later refusals) and ends the
// workflow when the answer ran nothing.
func (w *Workflows) Settled(wf *Workflow, outcome string, end bool) {
	w.mu.Lock()
	wf.outcome = outcome
	if end {
		wf.used = true
	}
	w.mu.Unlock()
}

// check finds an answerable workflow; w.mu is held.
func (w *Workflows) check(id, tool string) (*Workflow, error) {
	wf, ok := w.byID[id]
	switch {
	case !ok:
		return nil, fmt.Errorf("%w %q: it was never issued in this session or was forgotten; call the tool again to get a new one", ErrWorkflowUnknown, id)
	case wf.used || wf.resolved:
		return nil, fmt.Errorf("%w: workflow %s was already answered; call the tool again to get a new one", ErrWorkflowUsed, id)
	case w.now().After(wf.Expires):
		wf.used = true
		return wf, fmt.Errorf("%w: workflow %s expired at %s (approvals are valid for %s); call the tool again", ErrWorkflowExpired, id, wf.Expires.UTC().Format(time.RFC3339), w.ttl)
	case tool != "" && tool != wf.Tool && tool != wf.Outer:
		return nil, fmt.Errorf("workflow %s belongs to %s, not %s: answer it with the same tool (or pml:continue_workflow)", id, wf.Tool, tool)
	}
	return wf, nil
}

// Attach ties a pending workflow to the run of outer that made the call:
// the run's tool may answer it, and wrap gets the workflow's own payload
// and returns the one that rides along (it keeps the inner one). nil when
// the workflow is not pending here.
func (w *Workflows) Attach(id, outer string, wrap func(inner any) any) *Workflow {
	w.mu.Lock()
	defer w.mu.Unlock()
	wf, ok := w.byID[id]
	if !ok || wf.used || wf.resolved {
		return nil
	}
	wf.Data = wrap(wf.Data)
	wf.Outer = outer
	return wf
}

// Len is the number of workflows kept.
func (w *Workflows) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.byID)
}

// SetClock replaces the clock workflows expire by (tests).
func (w *Workflows) SetClock(now func() time.Time) {
	w.mu.Lock()
	w.now = now
	w.mu.Unlock()
}

// Finish marks a taken workflow as used for good.
func (w *Workflows) Finish(wf *Workflow) {
	w.mu.Lock()
	wf.used = true
	w.mu.Unlock()
}

// Pending reports whether wf can still be answered (released after an
// answer that could not be applied).
func (w *Workflows) Pending(wf *Workflow) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !wf.used && !wf.resolved
}

// Release makes a taken workflow answerable again.
func (w *Workflows) Release(wf *Workflow) {
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

// Has reports whether the workflow id is pending here (issued by this
// store, not answered, not forgotten).
func (w *Workflows) Has(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	wf, ok := w.byID[id]
	return ok && !wf.used && !wf.resolved
}
