// Package approve asks a person before a call runs, and applies the
// answer. It sits below the tool table and code runs, above permit
// (broker/layering_test.go checks the order).
//
// An approval is opened in four places: Layer (layer_approve.go: an ask
// permission, a dependency install, a missing API key), the broker's
// registry layer (an integrity change, through the Approver's
// NeedsDialog, ApprovalFor and AskInDialog), Network (approval_network.go,
// a wrapper around the execute step: the tool's egress proxy refused a
// host during the call) and the broker's code runs (an inner call's
// approval re-attached to the run's workflow).
// Each is put to the person by AskInDialog (dialog.go): in the client's
// own dialog (MCP elicitation) when it has one, else as an
// approval_required result answered with continue_workflow.
//
// Answers come back through AnswerCall (answers.go, from the broker's
// input layer) or straight from the dialog; an approved call runs
// through Approver.Execute, the handler the broker hands it (its execute
// step wrapped in Network): approve never calls back into the broker for
// it. A workflow whose payload carries out the answer itself (Resumer: a
// paused code run, a network grant) is handed the answer; what approve
// asks of the rest of pml is in interfaces.go. "always" is saved in
// .pml.json first (always.go, config_write.go), and nothing runs when it
// cannot be.
package approve
