package broker

import (
	"time"

	"github.com/pml-dev/pml/broker/approve"
	"github.com/pml-dev/pml/broker/workflow"
)

// The pending approvals of a session live in package workflow; these
// names keep the broker's facade (cmd/pml, tests) as it was.
type (
	ApprovalType = workflow.ApprovalType
	Approval     = workflow.Approval
	Continuation = workflow.Continuation
	Workflow     = workflow.Workflow
	Workflows    = workflow.Workflows
	RelayRefused = workflow.RelayRefused
)

const (
	ApprovalToolPermission = workflow.ApprovalToolPermission
	ApprovalDependency     = workflow.ApprovalDependency
	ApprovalIntegrity      = workflow.ApprovalIntegrity
	ApprovalAPIKey         = workflow.ApprovalAPIKey
	ApprovalRegistryGrant  = workflow.ApprovalRegistryGrant
	MaxWorkflows           = workflow.MaxWorkflows
)

// Workflow errors, tested with errors.Is.
var (
	ErrWorkflowUnknown  = workflow.ErrWorkflowUnknown
	ErrWorkflowUsed     = workflow.ErrWorkflowUsed
	ErrWorkflowExpired  = workflow.ErrWorkflowExpired
	ErrAnsweredInDialog = workflow.ErrAnsweredInDialog
)

// NewWorkflows returns a store whose workflows expire after ttl.
func NewWorkflows(ttl time.Duration) *Workflows { return workflow.NewWorkflows(ttl) }

// ApprovalText is an approval's text for a client that lists the asking
// tool as callAs ("" when it does not list it): see approve.ApprovalText.
func ApprovalText(a Approval, callAs string) string { return approve.ApprovalText(a, callAs) }
