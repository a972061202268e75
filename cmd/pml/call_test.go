package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/pml-dev/pml/broker/approve"
	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/internal/config"
)

func TestParseArgs(t *testing.T) {
	cases := []struct {
		name, raw, stdin, want, err string
	}{
		{"no ARGS is an empty object", "", "", `{}`, ""},
		{"an object is passed on as written", `{"path": "a.txt"}`, "", `{"path": "a.txt"}`, ""},
		{"- reads stdin", "-", "{\"command\": \"ls\"}\n", "{\"command\": \"ls\"}\n", ""},
		{"empty stdin is an empty object", "-", "  \n", `{}`, ""},
		{"a list is refused", `[1]`, "", "", "not a list"},
		{"null is refused", `null`, "", "", "not null"},
		{"a string is refused", `"a.txt"`, "", "", "not a string"},
		{"broken JSON says where", `{"path": }`, "", "", "at byte 10"},
		{"two values are refused", `{} {}`, "", "", "not valid JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseArgs(c.raw, strings.NewReader(c.stdin))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "ARGS must be a JSON object") {
					t.Fatalf("err = %v, want one mentioning %q", err, c.err)
				}
				return
			}
			if err != nil || string(got) != c.want {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

func TestExitTableIsConsistent(t *testing.T) {
	seen := map[int]bool{}
	outcomes := map[string]bool{}
	for _, e := range callExits {
		if seen[e.code] || outcomes[e.outcome] {
			t.Errorf("code %d or outcome %q listed twice", e.code, e.outcome)
		}
		seen[e.code], outcomes[e.outcome] = true, true
		if outcomeOf(e.code) != e.outcome {
			t.Errorf("outcomeOf(%d) = %q", e.code, outcomeOf(e.code))
		}
	}
	for _, c := range []int{exitOK, exitToolError, exitUsage, exitApproval, exitDenied, exitUnavailable, exitCloud, exitTimeout, exitInterrupted} {
		if !seen[c] {
			t.Errorf("exit code %d is not in the table", c)
		}
	}
	help := newCallCmd(&globals{}).Long
	for _, e := range callExits {
		if !strings.Contains(help, e.outcome) {
			t.Errorf("pml call --help does not document %q", e.outcome)
		}
	}
}

func TestOutputIsOneJSONLine(t *testing.T) {
	var b bytes.Buffer
	writeOutput(&b, callOutput{Tool: "t", Outcome: "ok", Text: "a\nb <&>", Structured: map[string]any{"x": 1}})
	if bytes.Count(b.Bytes(), []byte("\n")) != 1 || !bytes.HasSuffix(b.Bytes(), []byte("\n")) {
		t.Fatalf("not one line: %q", b.String())
	}
	var back map[string]any
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"tool", "outcome", "exit_code", "is_error", "text", "structured"} {
		if _, ok := back[k]; !ok {
			t.Errorf("field %q missing: %s", k, b.String())
		}
	}
	if !strings.Contains(b.String(), "<&>") {
		t.Errorf("HTML-escaped: %s", b.String())
	}
	b.Reset()
	writeOutput(&b, callOutput{Tool: "t", Structured: map[string]any{"f": func() {}}})
	if err := json.Unmarshal(b.Bytes(), &back); err != nil || back["structured"] != nil {
		t.Errorf("unencodable structured content: %s, %v", b.String(), err)
	}
}

func TestApprovalHint(t *testing.T) {
	withFile := &config.Config{Path: "/w/.pml.json", Exists: true}
	noFile := &config.Config{Path: "/w/.pml.json"}
	approval := func(pattern string) workflow.Approval {
		return workflow.Approval{Tool: "shell:exec", ApprovalType: workflow.ApprovalToolPermission, Context: map[string]any{"pattern": pattern}}
	}
	cases := []struct {
		name string
		cfg  *config.Config
		a    workflow.Approval
		want []string
	}{
		{"no pattern matched", withFile, approval(""), []string{`add the pattern "shell:exec" to permissions.allow of /w/.pml.json`, `jq '.permissions.allow += ["shell:exec"]' .pml.json`}},
		{"a wildcard in ask", withFile, approval("shell:*"), []string{`it matched "shell:*" in permissions.ask`, `.permissions.allow += ["shell:exec"]`}},
		{"the exact name in ask", withFile, approval("shell:exec"), []string{`listed in permissions.ask`, `.permissions.ask -= ["shell:exec"] | .permissions.allow += ["shell:exec"]`}},
		{"no .pml.json keeps the defaults", noFile, approval(""), []string{`There is no /w/.pml.json yet`, `"filesystem:read_file"`, `"shell:exec"]`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := approvalHint(c.cfg, c.a)
			if !strings.Contains(got, "cannot answer an approval") {
				t.Errorf("hint does not say pml call cannot answer:\n%s", got)
			}
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("hint lacks %q:\n%s", w, got)
				}
			}
		})
	}
}

// TestApprovalHintFollowsWhereTheSettingComesFrom: a list set by a PML_
// variable replaces the file's, so the hint names the variable, never an
// edit of .pml.json that would change nothing (or add what is there).
func TestApprovalHintFollowsWhereTheSettingComesFrom(t *testing.T) {
	envAllow := &config.Config{Path: "/w/.pml.json", Exists: true,
		Permissions: config.Permissions{Allow: []string{"filesystem:read_file"}, Ask: []string{"shell:exec"}},
		Sources:     map[string]string{"permissions.allow": "PML_PERMISSIONS_ALLOW", "permissions.ask": "/w/.pml.json"}}
	envAllowed := &config.Config{Path: "/w/.pml.json", Exists: true,
		Permissions: config.Permissions{Allow: []string{"shell:exec"}, Ask: []string{"shell:exec"}},
		Sources:     map[string]string{"permissions.allow": "PML_PERMISSIONS_ALLOW", "permissions.ask": "/w/.pml.json"}}
	envAsk := &config.Config{Path: "/w/.pml.json", Exists: true,
		Permissions: config.Permissions{Allow: []string{"shell:*"}, Ask: []string{"shell:exec"}},
		Sources:     map[string]string{"permissions.allow": "/w/.pml.json", "permissions.ask": "PML_PERMISSIONS_ASK"}}
	perm := func(pattern string) workflow.Approval {
		return workflow.Approval{Tool: "shell:exec", ApprovalType: workflow.ApprovalToolPermission, Context: map[string]any{"pattern": pattern}}
	}
	cases := []struct {
		name      string
		cfg       *config.Config
		a         workflow.Approval
		want, not []string
	}{
		{"allow from the variable", envAllow, perm(""),
			[]string{`add "shell:exec" to PML_PERMISSIONS_ALLOW, which replaces the file's permissions.allow`, `export PML_PERMISSIONS_ALLOW=filesystem:read_file,shell:exec`},
			[]string{`jq '.permissions.allow`}},
		{"already allowed by the variable, asked by the file", envAllowed, perm("shell:exec"),
			[]string{`listed in permissions.ask of /w/.pml.json, which beats its allow (it is allowed by PML_PERMISSIONS_ALLOW)`, `jq '.permissions.ask -= ["shell:exec"]' .pml.json`},
			[]string{`permissions.allow +=`, `add it to permissions.allow`}},
		{"asked by the variable", envAsk, perm("shell:exec"),
			[]string{`"shell:exec" is named in PML_PERMISSIONS_ASK in the environment`, `take it out of that variable`},
			[]string{`jq`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := approvalHint(c.cfg, c.a)
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("hint lacks %q:\n%s", w, got)
				}
			}
			for _, w := range c.not {
				if strings.Contains(got, w) {
					t.Errorf("hint has %q:\n%s", w, got)
				}
			}
		})
	}
}

// TestNetworkApprovalHint: a refused connection is not a permission: the
// hint names the host and the network list (where it comes from), says
// the command ran, and never tells to edit permissions.ask.
func TestNetworkApprovalHint(t *testing.T) {
	net := func(key, who string) workflow.Approval {
		return workflow.Approval{Tool: "shell:exec", ApprovalType: approve.ApprovalNetwork, Context: map[string]any{
			"pattern": "shell:exec", "hosts": []string{"example.com:443"}, "config_key": key, "who": who, "result": "exit code: 1"}}
	}
	file := &config.Config{Path: "/w/.pml.json", Exists: true, Permissions: config.Permissions{Allow: []string{"shell:exec"}},
		Sources: map[string]string{"permissions.allow": "/w/.pml.json"}}
	envNet := &config.Config{Path: "/w/.pml.json", Exists: true, Sandbox: config.Sandbox{Network: config.Network{Allow: []string{"a.test:80"}}},
		Sources: map[string]string{"sandbox.network.allow": "PML_SANDBOX_NETWORK_ALLOW"}}
	noFile := &config.Config{Path: "/w/.pml.json", Sources: map[string]string{"permissions.allow": "PML_PERMISSIONS_ALLOW"}}
	cases := []struct {
		name string
		cfg  *config.Config
		a    workflow.Approval
		want []string
	}{
		{"shell:exec, file", file, net("sandbox.network.allow", "shell:exec"),
			[]string{"shell:exec ran, and pml's egress proxy refused its connection to example.com:443, which sandbox.network.allow does not allow", "structured.context.result",
				`jq '.sandbox.network.allow += ["example.com:443"]' .pml.json`}},
		{"shell:exec, variable", envNet, net("sandbox.network.allow", "shell:exec"),
			[]string{"add example.com:443 to PML_SANDBOX_NETWORK_ALLOW", "export PML_SANDBOX_NETWORK_ALLOW=a.test:80,example.com:443"}},
		{"shell:exec, no file", noFile, net("sandbox.network.allow", "shell:exec"),
			[]string{"export PML_SANDBOX_NETWORK_ALLOW=example.com:443"}},
		{"a server", file, net("mcps.my-probe.network.allow", "server my-probe"),
			[]string{"server my-probe ran", `jq '.mcps["my-probe"].network.allow += ["example.com:443"]'`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := approvalHint(c.cfg, c.a)
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("hint lacks %q:\n%s", w, got)
				}
			}
			for _, bad := range []string{"permissions.ask", "nothing ran"} {
				if strings.Contains(got, bad) {
					t.Errorf("hint says %q:\n%s", bad, got)
				}
			}
		})
	}
}

// TestSummaryLinesKeepsTheLinesBounded: every line of a message up to the
// bound, then a count of the rest (the old summary kept the first line).
func TestSummaryLinesKeepsTheLinesBounded(t *testing.T) {
	got := summaryLines("unavailable: the MCP server x exited (exit code 3); its last stderr lines:\nboom\nbang\n")
	if want := "unavailable: the MCP server x exited (exit code 3); its last stderr lines:\n  boom\n  bang"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	long := strings.Repeat("row\n", summaryMaxLines+5)
	if got := summaryLines(long); strings.Count(got, "row") != summaryMaxLines || !strings.Contains(got, "5 more lines") {
		t.Errorf("a long text: %q", got)
	}
	if got := summaryLines(strings.Repeat("é", summaryMaxBytes)); !utf8.ValidString(got) || len(got) > summaryMaxBytes+100 {
		t.Errorf("a long line is not cut on a rune: %d bytes", len(got))
	}
}

// TestAllowListNamesTheListInForce: pml add's note names
// PML_PERMISSIONS_ALLOW when it is set (it replaces the file's list).
func TestAllowListNamesTheListInForce(t *testing.T) {
	t.Setenv("PML_PERMISSIONS_ALLOW", "")
	if got := allowList(); got != "permissions.allow in .pml.json" {
		t.Errorf("without the variable: %q", got)
	}
	t.Setenv("PML_PERMISSIONS_ALLOW", "filesystem:*")
	if got := allowList(); !strings.HasPrefix(got, "PML_PERMISSIONS_ALLOW") {
		t.Errorf("with the variable: %q", got)
	}
}
