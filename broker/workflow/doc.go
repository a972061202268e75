// Package workflow holds a session's pending approvals: the approval a
// result asks a person for (Approval, one shape for every type), the
// answer a client relays (Continuation), and the store (Workflows) that
// issues, hands out once, expires and forgets them. It decides nothing:
// a workflow is opened in the four places package broker's doc names,
// and its payload (Workflow.Data: a paused code run, a network grant, an
// integrity change) is carried out by whoever answers it.
package workflow
