package docker

import "context"

// negotiate settles the API version with the engine before a request,
// under a lock whose waiters give up with their context. The Docker
// client would do it inside the first request, holding a mutex of its
// own across the ping: a request whose context has no deadline (the reap
// of leftovers at start-up) then held every other request, deadline or
// not, for as long as the engine did not answer. A failure is not
// reported here: the request that follows meets it (or its own ended
// context) and says it as it always did.
func (r *Runtime) negotiate(ctx context.Context) {
	if r.negotiated.Load() {
		return
	}
	if err := r.negotiating.lock(ctx); err != nil {
		return
	}
	defer r.negotiating.unlock()
	if r.negotiated.Load() {
		return
	}
	ping, err := r.cli.Ping(ctx)
	if err != nil {
		return
	}
	r.cli.NegotiateAPIVersionPing(ping)
	r.negotiated.Store(true)
}
