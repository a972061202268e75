package clients

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// tomlFormat is Codex's config.toml: pml is the table [mcp_servers.pml]
// (with its sub-table [mcp_servers.pml.env]). go-toml does not keep
// comments, so the file is edited as text: pml's tables are replaced (or
// appended) and every other line stays as it is. The result is parsed
// again and must hold exactly the entry written.
type tomlFormat struct{}

type tomlServer struct {
	Command string            `toml:"command"`
	Args    []string          `toml:"args"`
	Env     map[string]string `toml:"env"`
}

type tomlDoc struct {
	MCPServers map[string]map[string]any `toml:"mcp_servers"`
}

// tableHeader matches a table header line and captures its name.
var tableHeader = regexp.MustCompile(`^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$`)

func (tomlFormat) set(data []byte, srv Server) ([]byte, []string, error) {
	var doc tomlDoc
	if err := toml.Unmarshal(data, &doc); err != nil {
		return nil, nil, fmt.Errorf("not valid TOML: %w", err)
	}
	var others []string
	for n := range doc.MCPServers {
		if n != ServerName {
			others = append(others, n)
		}
	}
	own := "mcp_servers." + ServerName
	lines := strings.SplitAfter(string(data), "\n")
	var out strings.Builder
	in, found := false, false
	var kept map[string]any
	if cur, ok := doc.MCPServers[ServerName]; ok {
		kept = cur
	}
	block := tomlBlock(srv, kept)
	// pending are the blank and comment lines seen inside pml's tables
	// since its last key: they introduce what follows, so they stay.
	var pending strings.Builder
	for _, l := range lines {
		if m := tableHeader.FindStringSubmatch(strings.TrimRight(l, "\r\n")); m != nil && !strings.HasPrefix(strings.TrimSpace(l), "[[") {
			name := strings.ReplaceAll(m[1], " ", "")
			if name == own || strings.HasPrefix(name, own+".") || name == `mcp_servers."pml"` || strings.HasPrefix(name, `mcp_servers."pml".`) {
				if !found {
					out.WriteString(block)
					found = true
				}
				in = true
				pending.Reset()
				continue
			}
			if in {
				out.WriteString(pending.String())
			}
			in = false
		}
		if !in {
			out.WriteString(l)
			continue
		}
		if t := strings.TrimSpace(l); t == "" || strings.HasPrefix(t, "#") {
			pending.WriteString(l)
		} else {
			pending.Reset()
		}
	}
	if in {
		out.WriteString(pending.String())
	}
	if _, ok := doc.MCPServers[ServerName]; ok && !found {
		return nil, nil, errors.New("the pml server is defined inline (not as a [mcp_servers.pml] table), which pml does not edit: make it a table, or remove it, and run pml init again")
	}
	res := out.String()
	if !found {
		if res != "" && !strings.HasSuffix(res, "\n") {
			res += "\n"
		}
		if res != "" && !strings.HasSuffix(res, "\n\n") {
			res += "\n"
		}
		res += block
	}
	// The edit is checked by reading it back.
	var check struct {
		MCPServers map[string]tomlServer `toml:"mcp_servers"`
	}
	if err := toml.Unmarshal([]byte(res), &check); err != nil {
		return nil, nil, fmt.Errorf("internal error: the edited file does not parse: %w", err)
	}
	got := check.MCPServers[ServerName]
	if got.Command != srv.Command || strings.Join(got.Args, "\x00") != strings.Join(srv.Args, "\x00") || got.Env["PML_WORKSPACE"] != srv.Env["PML_WORKSPACE"] {
		return nil, nil, errors.New("internal error: the edited file does not hold the pml server as written")
	}
	return []byte(res), others, nil
}

// tomlBlock is pml's tables. Keys of an existing entry that pml does not
// set (startup_timeout_sec, enabled_tools...) are kept, as are other env
// variables.
func tomlBlock(srv Server, kept map[string]any) string {
	var b bytes.Buffer
	b.WriteString("[mcp_servers." + ServerName + "]\n")
	b.WriteString("command = " + tomlString(srv.Command) + "\n")
	b.WriteString("args = [")
	for i, a := range srv.Args {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(tomlString(a))
	}
	b.WriteString("]\n")
	var extra []string
	for k, v := range kept {
		if _, table := v.(map[string]any); !table && k != "command" && k != "args" && k != "env" {
			// Sub-tables other than env (rare) are not carried over:
			// go-toml would write them at the top level.
			extra = append(extra, k)
		}
	}
	if len(extra) > 0 {
		keep := map[string]any{}
		for _, k := range extra {
			keep[k] = kept[k]
		}
		if more, err := toml.Marshal(keep); err == nil {
			b.Write(more)
		}
	}
	env := map[string]string{}
	if old, ok := kept["env"].(map[string]any); ok {
		for k, v := range old {
			if s, ok := v.(string); ok {
				env[k] = s
			}
		}
	}
	for k, v := range srv.Env {
		env[k] = v
	}
	for _, k := range Unpinned {
		if _, set := srv.Env[k]; !set {
			delete(env, k)
		}
	}
	if len(env) == 0 {
		return b.String()
	}
	b.WriteString("\n[mcp_servers." + ServerName + ".env]\n")
	for _, k := range sortedKeys(env) {
		b.WriteString(tomlKey(k) + " = " + tomlString(env[k]) + "\n")
	}
	return b.String()
}

// tomlString is s as a TOML basic string. A JSON string is one, except
// that TOML has no \/ (encoding/json never writes it).
func tomlString(s string) string {
	b, _ := marshal(s)
	return string(b)
}

func (tomlFormat) entry(data []byte) (Server, bool, error) {
	var doc struct {
		MCPServers map[string]tomlServer `toml:"mcp_servers"`
	}
	if err := toml.Unmarshal(data, &doc); err != nil {
		return Server{}, false, fmt.Errorf("not valid TOML: %w", err)
	}
	s, ok := doc.MCPServers[ServerName]
	return Server(s), ok, nil
}

var bareKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// tomlKey is k bare when TOML allows it, else quoted.
func tomlKey(k string) string {
	if bareKey.MatchString(k) {
		return k
	}
	return tomlString(k)
}
