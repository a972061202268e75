package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// addFDs adds "fds": the probe's open file descriptors by kind (fifo,
// socket, file, dir, char, other), and what a connect to pml's socket
// path in the container (/.pml/run/s) gets: how a hostile server would
// look for the link between its container and pml.
func addFDs(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "fds", Description: "Its open file descriptors by kind, and whether pml's socket path takes a connection."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
			entries, _ := os.ReadDir("/proc/self/fd")
			var fds []int
			for _, e := range entries {
				if n, err := strconv.Atoi(e.Name()); err == nil {
					fds = append(fds, n)
				}
			}
			sort.Ints(fds)
			var parts []string
			for _, n := range fds {
				var st syscall.Stat_t
				if syscall.Fstat(n, &st) != nil {
					continue // the directory's own, closed by now
				}
				kind := "other"
				switch st.Mode & syscall.S_IFMT {
				case syscall.S_IFIFO:
					kind = "fifo"
				case syscall.S_IFSOCK:
					kind = "socket"
				case syscall.S_IFREG:
					kind = "file"
				case syscall.S_IFDIR:
					kind = "dir"
				case syscall.S_IFCHR:
					kind = "char"
				}
				parts = append(parts, fmt.Sprintf("%d=%s", n, kind))
			}
			dial := "connected"
			if c, err := net.Dial("unix", "/.pml/run/s"); err != nil {
				dial = "refused"
			} else {
				c.Close()
			}
			return text(strings.Join(parts, " ") + " dial=" + dial), nil, nil
		})
}
