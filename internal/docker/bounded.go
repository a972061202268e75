package docker

// Requests the Docker client does not bound by their context on its own:
// the API version negotiation before the first request, and the attach.

import (
	"context"
	"net/http"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
)

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
	// One GET /_ping settles the version and says whether the engine is
	// Podman (its header, podman.go): at a session's start these were two
	// round trips on the way to the first container, three with the
	// client's own HEAD.
	if resp, err := r.get(ctx, "/_ping"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			r.rememberPing(resp.Header.Get(libpodHeader))
			r.cli.NegotiateAPIVersionPing(types.Ping{APIVersion: resp.Header.Get("Api-Version"), OSType: resp.Header.Get("Ostype")})
			r.negotiated.Store(true)
			return
		}
	}
	ping, err := r.cli.Ping(ctx)
	if err != nil {
		return
	}
	r.cli.NegotiateAPIVersionPing(ping)
	r.negotiated.Store(true)
}

// attach is ContainerAttach bounded by ctx. The client's attach upgrades
// the connection with a raw round trip that no context ends: an engine
// that stops answering then held the call past every deadline. A late
// answer is closed.
func (r *Runtime) attach(ctx context.Context, id string, opts container.AttachOptions) (types.HijackedResponse, error) {
	type answer struct {
		att types.HijackedResponse
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		att, err := r.cli.ContainerAttach(ctx, id, opts)
		answered <- answer{att, err}
	}()
	select {
	case a := <-answered:
		return a.att, a.err
	case <-ctx.Done():
		go func() {
			if a := <-answered; a.err == nil {
				a.att.Close()
			}
		}()
		return types.HijackedResponse{}, ctx.Err()
	}
}
