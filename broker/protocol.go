package broker

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// logProtocol says in pml's log which MCP protocol revision initialize
// agreed on, and why when it is not the one the client asked for: the
// go-sdk answers an unknown revision with the latest it offers through
// initialize and says nothing, and a client that then gives up leaves no
// trace of the reason.
func logProtocol(x *binding) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if method != "initialize" || err != nil {
				return res, err
			}
			in, ok1 := req.GetParams().(*mcp.InitializeParams)
			out, ok2 := res.(*mcp.InitializeResult)
			if !ok1 || !ok2 || in == nil || out == nil {
				return res, err
			}
			asked, agreed := in.ProtocolVersion, out.ProtocolVersion
			log := x.get().log
			if asked == agreed {
				log.Debug().Str("protocol", agreed).Msg("MCP protocol revision agreed with the client")
				return res, err
			}
			known := mcp.SupportedProtocolVersions()
			why := "pml does not know that revision (it knows " + strings.Join(known, ", ") + ")"
			if slices.Contains(known, asked) {
				// 2026-07-28 and later: initialize belongs to the
				// revisions before them.
				why = "that revision has no initialize request, so an initialize is answered on the latest revision that has one"
			}
			log.Info().Str("asked", asked).Str("agreed", agreed).
				Msg("the client asked for MCP protocol revision " + strconv.Quote(asked) + "; " + why + ": answered with " + agreed +
					", the latest pml offers through initialize; a client that cannot use it ends the session")
			return res, err
		}
	}
}
