package mcpserve

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
)

// logProtocol says in pml's log which MCP protocol revision initialize
// agreed on, and why when it is not the one the client asked for: the
// go-sdk answers an unknown revision with the latest it offers through
// initialize and says nothing, and a client that then gives up leaves no
// trace of the reason. log gives the log of the moment (the workspace's
// broker may change during a session).
func logProtocol(log func() zerolog.Logger) mcp.Middleware {
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
			log := log()
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

// batchRule allows a JSON-RPC batch on a stdio session (jsonrpc.Filter)
// when the revision initialize agreed on has batches: 2025-03-26 (and
// 2024-11-05, which did not forbid them); 2025-06-18 removed them. pml
// serve draws the same line by the same agreed revision (http_batch.go).
func batchRule(ss func() *mcp.ServerSession) func() error {
	return func() error {
		var ip *mcp.InitializeParams
		if s := ss(); s != nil {
			ip = s.InitializeParams()
		}
		if ip == nil {
			return errors.New("a JSON-RPC batch is accepted only after initialize, on MCP protocol 2025-03-26: send one message per line")
		}
		if v := agreedRevision(ip.ProtocolVersion); v >= "2025-06-18" {
			return fmt.Errorf("JSON-RPC batches were removed in MCP protocol 2025-06-18 and this session uses %s: send one message per line", v)
		}
		return nil
	}
}

// agreedRevision is the revision initialize answers a client asking for
// asked with, as the go-sdk (v1.8.0) chooses it: asked when it knows it
// and it has initialize (before 2026-07-28), else the latest that has.
func agreedRevision(asked string) string {
	known := mcp.SupportedProtocolVersions()
	if slices.Contains(known, asked) && asked < "2026-07-28" {
		return asked
	}
	for _, v := range known { // newest first
		if v < "2026-07-28" {
			return v
		}
	}
	return "2025-11-25"
}
