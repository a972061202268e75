// Package coderun runs code in Deno containers and answers the code's
// tool calls: the cloud's execute_locally (seed 003, option A: the cloud
// answers pml:execute with code to run here) and the functions of deno
// capabilities (pml add). The code runs in a container that can touch
// nothing (internal/execute); each of its mcp.* calls comes back as an
// inner call and goes through the whole request path (Runs.call, which is
// Broker.Call): resolve, permission, approval, container or cloud, audit,
// each inner call audited on its own. A run's inner calls are bounded
// (maxRunCalls over its life, maxRunInFlight at a time) and runs nest at
// most maxRunDepth deep.
//
// Where an approval is opened here: an inner call that needs a person
// pauses the run. Runs.settle re-attaches the inner call's workflow
// (workflow.Workflows.Attach) to the outer call, with a PausedCall as its
// payload; the outer call returns approval_required, the container waits
// (its compute clock paused), and the person's answer, through the
// approver (approve/answers.go), reaches PausedCall.Resume (an
// approve.Resumer), which applies the answer through that approver and
// drives the same run on. An approval that expires unanswered stops the
// run.
//
// Runs imports only downward (approve, call, workflow, internal/*): it
// meets the rest of pml at two interfaces, Caller (the request path, the
// broker's Call) and Containers (what the sandbox starts a run's
// container with), beside the Sandbox's values.
package coderun
