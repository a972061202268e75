package broker

import (
	"context"

	"github.com/pml-dev/pml/broker/approve"
	"github.com/pml-dev/pml/internal/toolbox"
)

// chain builds the request path, outermost first:
//
//	audit → input → resolve → permit → registry → schema → declared → approve → execute
//
// input sends answers to approvals (continue_workflow, elicitation) to
// answers.go instead, which ends in the same execute step. It returns the
// whole path and the path below the audit layer (for a call re-entered
// inside an audited one: approveIntegrity runs the call again).
func (b *Broker) chain() (whole, belowAudit Handler) {
	var h Handler = executeLayerOf(b)
	h = approveLayerOf(b, h)
	h = declaredLayer{next: h, declared: b.registry.declaredBy, decide: b.perms.Decide, source: b.perms.Source}
	h = schemaLayer{next: h, schema: b.knownSchema}
	h = registryLayerOf(b, h)
	h = PermitLayer{Next: h, Decide: b.perms.Decide, Source: b.perms.Source}
	h = resolveLayerOf(b, h)
	h = inputLayer{next: h, answers: HandlerFunc(b.ask.AnswerCall)}
	return auditLayer{next: h, log: b.log, sink: b.audit}, h
}

// The layers get only what they use of the broker, as functions (never
// the *Broker): these build them.

// asking is what a layer that opens an approval uses: whether the call
// must be refused for want of the client's dialog (dialog.go), the
// approval's text (approval_text.go), and putting it to the person.
type asking struct {
	needsDialog func(c *Call, tool, pattern string, args map[string]any) (Result, bool)
	approval    func(wf *Workflow) Approval
	inDialog    func(ctx context.Context, c *Call, wf *Workflow, a Approval) Result
}

func askingOf(b *Broker) asking {
	return asking{needsDialog: b.ask.NeedsDialog, approval: b.ask.ApprovalFor, inDialog: b.ask.AskInDialog}
}

func resolveLayerOf(b *Broker, next Handler) resolveLayer {
	return resolveLayer{
		next: next,
		known: func(tool string) bool {
			return b.srv.hasTool(tool) || b.srv.serverOf(tool) != nil || b.cloud.isCloudTool(tool)
		},
		registryName: func(tool string) bool { return registryCandidate(tool) && b.registry.registryLookups() },
	}
}

func registryLayerOf(b *Broker, next Handler) registryLayer {
	return registryLayer{next: next, fetch: b.registry.resolveFromRegistry, ask: askingOf(b)}
}

func approveLayerOf(b *Broker, next Handler) approve.Layer {
	return approve.Layer{
		Next: next,
		NeedsInstall: func(tool string) bool {
			srv := b.srv.serverOf(tool)
			return srv != nil && !b.srv.deps.Installed(srv.cfg)
		},
		CloudTool: b.cloud.isCloudTool,
		MissingKeys: func(ctx context.Context, tool string) []string {
			// The keys a cloud tool needs come with the cloud's tool list:
			// a call right after start (pml call, a fast client) waits for
			// it as tools/list does, so no key is left out.
			b.cloud.waitCloud(ctx)
			_, missing := byokFor(b.sb, b.cloud, tool)
			return missing
		},
		CloudOn: func() bool { return b.cloud.client.Enabled() },
		Local: func(ctx context.Context, tool string, args map[string]any) Result {
			return b.cloud.exec.run(ctx, toolbox.Tool{Name: tool}, args)
		},
		Ask: b.ask,
	}
}

func executeLayerOf(b *Broker) executeLayer { return executeLayer{run: b.runTool} }
