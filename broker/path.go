package broker

import (
	"fmt"
	"strings"

	"github.com/pml-dev/pml/broker/approve"
	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/broker/permit"
	tl "github.com/pml-dev/pml/broker/tools"
	"github.com/pml-dev/pml/internal/capname"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/mcpname"
	"github.com/pml-dev/pml/internal/termsafe"
	"github.com/pml-dev/pml/internal/trust"
)

// chain builds the request path, outermost first:
//
//	audit → input → resolve → permit → registry → pin → schema → declared → approve → execute
//
// input sends answers to approvals (continue_workflow, elicitation) to
// answers.go instead, which ends in the same execute step. It returns the
// whole path and the path below the audit layer (for a call re-entered
// inside an audited one: approveIntegrity runs the call again).
func (b *Broker) chain() (whole, belowAudit call.Handler) {
	// The network approval wraps execute (approve/approval_network.go); an
	// approved call runs through the same handler (Approver.Execute).
	var h call.Handler = approve.Network{Next: executeLayerOf(b), Ask: b.ask}
	b.ask.Execute = h
	h = approveLayerOf(b, h)
	h = declaredLayer{next: h, decls: b.registry, perms: b.perms}
	h = tl.SchemaLayer{Next: h, Schemas: b.srv}
	h = tl.PinLayer{Next: h, Pins: b.pins}
	h = registryLayerOf(b, h)
	h = permit.PermitLayer{Next: h, Rules: b.perms}
	h = resolveLayerOf(b, h)
	h = inputLayer{next: h, answers: call.HandlerFunc(b.ask.AnswerCall)}
	return auditLayer{next: h, log: b.log, sink: b.audit}, h
}

// The layers get only what they use of the broker, as functions (never
// the *Broker): these build them.

func resolveLayerOf(b *Broker, next call.Handler) tl.ResolveLayer {
	return tl.ResolveLayer{Next: next, Names: toolNames{srv: b.srv, cloud: b.cloud, registry: b.registry, ask: b.ask, ws: b.sb.Workspace}}
}

// toolNames say where a tool name comes from (tools.Names): the sources,
// and the trust state for a name the project's policy would offer.
type toolNames struct {
	srv      *tl.Servers
	cloud    *tl.Cloud
	registry *tl.Registry
	ask      *approve.Approver
	ws       string
}

func (n toolNames) Known(tool string) bool {
	if n.srv.HasTool(tool) {
		return true
	}
	// A tool a server has not listed (yet) is its own to answer, but a
	// name outside MCP's rule is none it may list (tools/server_tools.go):
	// not asked about, not forwarded.
	return ruledAction(tool) && (n.srv.ServerOf(tool) != nil || n.cloud.IsCloudTool(tool))
}

func (n toolNames) RegistryName(tool string) bool {
	return ruledAction(tool) && tl.RegistryCandidate(tool) && n.registry.Lookups()
}

func (n toolNames) Withheld(tool string) error {
	return withheldByTrust(tool, n.ask.TrustState.Untrusted(), trust.Names(n.ask.Config), n.ws)
}

// withheldByTrust says, for a tool no source has, whether the project's
// policy would offer it once trusted: its namespace is a server of mcps
// or the namespace of a capability the policy names, each a grant that
// is not trusted (untrusted). A CI job calling it gets "trust the
// checkout" (exit 3, as docs/ci.md says), not "no such tool".
func withheldByTrust(tool string, untrusted []config.Grant, files, ws string) error {
	ns, _, ok := strings.Cut(tool, ":")
	if !ok || ns == "" {
		return nil
	}
	for _, g := range untrusted {
		what := ""
		switch {
		case strings.HasPrefix(g.Key, "mcps."+ns+"#"):
			what = "the server " + termsafe.Quote(ns, 128) + " of mcps"
		case strings.HasPrefix(g.Key, "capabilities="):
			name := strings.TrimPrefix(g.Key, "capabilities=")
			if ref, err := capname.Parse(name); err == nil && strings.EqualFold(ref.Namespace, ns) {
				what = "the capability " + termsafe.Quote(name, 200) + " of capabilities"
			}
		}
		if what != "" {
			return fmt.Errorf("%w: %s comes from %s in %s, whose content is not trusted, so it is not offered: review the file and run `pml trust` in %s (a CI job: `pml trust --yes` on the checkout it chose)",
				call.ErrNotTrusted, termsafe.Quote(tool, 200), what, files, ws)
		}
	}
	return nil
}

// registryLayer is the registry layer of broker's registry, whose
// integrity changes it carries to the workflow.
type registryLayer = tl.RegistryLayer[tl.IntegrityChange]

// The registry layer asks through the approver (approve/dialog.go,
// approve/approval_text.go).
func registryLayerOf(b *Broker, next call.Handler) registryLayer {
	return registryLayer{
		Next:     next,
		Registry: b.registry,
		Ask:      b.ask,
	}
}

// The approve layer reads the servers and the cloud through the approver
// (approve/interfaces.go; approve.go wires them).
func approveLayerOf(b *Broker, next call.Handler) approve.Layer {
	return approve.Layer{Next: next, GrantNeeded: b.registry.GrantNeeded, Ask: b.ask}
}

func executeLayerOf(b *Broker) executeLayer {
	return executeLayer{run: b.runTool, serve: b.serveFeature}
}

// ruledAction reports whether the action of tool (namespace:action)
// follows MCP's rule for tool names (internal/mcpname).
func ruledAction(tool string) bool {
	_, action, ok := strings.Cut(tool, ":")
	return ok && mcpname.Tool(action) == nil
}
