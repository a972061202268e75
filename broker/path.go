package broker

// chain builds the request path, outermost first:
//
//	audit → input → resolve → permit → registry → schema → approve → execute
//
// input sends answers to approvals (continue_workflow, elicitation) to
// answers.go instead, which ends in the same execute step. It returns the
// whole path and the path below the audit layer (for a call re-entered
// inside an audited one: approveIntegrity runs the call again).
func (b *Broker) chain() (whole, belowAudit Handler) {
	var h Handler = executeLayer{b: b}
	h = approveLayer{b: b, next: h}
	h = schemaLayer{b: b, next: h}
	h = registryLayer{b: b, next: h}
	h = permitLayer{next: h, decide: b.decide, source: b.permSource}
	h = resolveLayer{b: b, next: h}
	h = inputLayer{next: h, answers: HandlerFunc(b.answerCall)}
	return auditLayer{next: h, log: b.log, sink: b.audit}, h
}
