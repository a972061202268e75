package approve

import (
	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/broker/permit"
	sbx "github.com/pml-dev/pml/broker/sandbox"
	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/internal/wirename"
)

// The names of the packages below, as this code used them when it was
// part of package broker.
type (
	Call         = call.Call
	Result       = call.Result
	Handler      = call.Handler
	Approval     = workflow.Approval
	ApprovalType = workflow.ApprovalType
	Continuation = workflow.Continuation
	Workflow     = workflow.Workflow
	Workflows    = workflow.Workflows
	Permissions  = permit.Permissions
	EgressSet    = sbx.EgressSet
)

const (
	ApprovalToolPermission = workflow.ApprovalToolPermission
	ApprovalDependency     = workflow.ApprovalDependency
	ApprovalIntegrity      = workflow.ApprovalIntegrity
	ApprovalToolChange     = workflow.ApprovalToolChange
	ApprovalAPIKey         = workflow.ApprovalAPIKey
	ApprovalRegistryGrant  = workflow.ApprovalRegistryGrant
)

var (
	errorResult    = call.ResultFor
	continueWire   = wirename.Encode(call.ContinueTool)
	shellEgressID  = sbx.ShellEgressID
	serverEgressID = sbx.ServerEgressID
	networkKey     = sbx.NetworkKey
)
