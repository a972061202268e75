package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/mcpjson"
)

func TestCheckInitFlags(t *testing.T) {
	for _, c := range []struct {
		name string
		o    initOptions
		want string // "" for no error
	}{
		{"the defaults are accepted", initOptions{cloudURL: config.DefaultCloudURL}, ""},
		{"a key is accepted", initOptions{cloudURL: config.DefaultCloudURL, apiKey: "pml-key-0123456789abcdef"}, ""},
		{"a value too short to be a key is refused", initOptions{cloudURL: config.DefaultCloudURL, apiKey: "y"}, "--api-key: it is too short"},
		{"local mode is accepted", initOptions{cloudURL: config.DefaultCloudURL, local: true}, ""},
		{"a key with local mode is a contradiction", initOptions{cloudURL: config.DefaultCloudURL, local: true, apiKey: "k"}, "contradict"},
		{"a cloud URL must be http(s)", initOptions{cloudURL: "ftp://x"}, `--cloud-url: "ftp://x" is not an http:// or https:// URL`},
		{"a key with a control character is refused without echoing it", initOptions{cloudURL: config.DefaultCloudURL, apiKey: "s\x01cret"}, "--api-key: it contains spaces or control characters"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := checkInitFlags(c.o)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if exitCode(err) != 2 || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v (exit %d), want exit 2 with %q", err, exitCode(err), c.want)
			}
			if strings.Contains(err.Error(), "cret") {
				t.Fatalf("the key was echoed: %v", err)
			}
		})
	}
}

func TestChooseKey(t *testing.T) {
	for _, c := range []struct {
		name        string
		o           initOptions
		inMCP       string
		stored      string
		interactive bool
		input       string
		action      keyAction
		key         string
		code        int
	}{
		{"a key flag is written", initOptions{apiKey: testKey}, "old", "s", true, "", keySet, testKey, 0},
		{"local mode removes the key even when one is there", initOptions{local: true}, "old", "", true, "", keyLocal, "", 0},
		{"a key in .mcp.json is moved out", initOptions{}, "old", "s", true, "", keyMove, "old", 0},
		{"a stored key is used without asking", initOptions{}, "", "s", true, "", keyStored, "", 0},
		{"without a terminal it is local mode", initOptions{}, "", "", false, "", keyLocal, "", 0},
		{"on a terminal with nothing else, the key is asked later", initOptions{}, "", "", true, "", keyAsk, "", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			term := newFakeTerm(c.interactive, strings.NewReader(c.input), nil)
			action, key, err := chooseKey(context.Background(), c.o, term.terminal, c.inMCP, c.stored)
			if exitCode(err) != c.code {
				t.Fatalf("err = %v, want exit %d", err, c.code)
			}
			if err == nil && (action != c.action || key != c.key) {
				t.Fatalf("got %v %q, want %v %q", action, key, c.action, c.key)
			}
			if asked := term.hidden > 0; asked != (c.input != "") {
				t.Fatalf("asked = %v for input %q", asked, c.input)
			}
		})
	}
}

// testKey is a value that can be a key.
const testKey = "pml-test-key-0123456789"

func TestAskKey(t *testing.T) {
	for _, c := range []struct {
		name   string
		input  string
		action keyAction
		key    string
		code   int
	}{
		{"a typed key is written", testKey + "\n", keySet, testKey, 0},
		{"Enter at the prompt is local mode", "\n", keyLocal, "", 0},
		{"a typed key with a space is refused", "a b\n", keyLocal, "", 2},
		{"a y is refused, not stored as the key", "y\n", keyLocal, "", 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			term := newFakeTerm(true, strings.NewReader(c.input), nil)
			action, key, err := askKey(context.Background(), initOptions{cloudURL: config.DefaultCloudURL}, term.terminal)
			if exitCode(err) != c.code {
				t.Fatalf("err = %v, want exit %d", err, c.code)
			}
			if err == nil && (action != c.action || key != c.key) {
				t.Fatalf("got %v %q, want %v %q", action, key, c.action, c.key)
			}
			if term.hidden != 1 || term.restored != 1 {
				t.Fatalf("echo off %d times, restored %d", term.hidden, term.restored)
			}
			if v := strings.TrimSpace(c.input); err != nil && len(v) > 2 && strings.Contains(err.Error(), v) {
				t.Fatalf("the refused value is echoed: %v", err)
			}
		})
	}
}

func TestKeyFromStdin(t *testing.T) {
	for _, c := range []struct{ in, want, err string }{
		{testKey + "\n", testKey, ""},
		{"  " + testKey + "\r\nrest\n", testKey, ""},
		{"", "", "stdin held no key"},
		{"\n\n", "", "stdin held no key"},
	} {
		got, err := keyFromStdin(strings.NewReader(c.in))
		if got != c.want || (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%q: got %q, %v; want %q, %q", c.in, got, err, c.want, c.err)
		}
	}
}

func TestGitignoreEntries(t *testing.T) {
	for _, c := range []struct {
		name  string
		merge bool
		want  string
	}{
		{"without a merge, pml's state and the personal file (never .mcp.json: it holds no secret; never .pml.json: it is the team's policy)", false, ".pml/ .pml.local.json"},
		{"a merge adds the backup", true, ".pml/ .pml.local.json .mcp.json.backup"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := strings.Join(gitignoreEntries(c.merge), " "); got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestConfirmMerge(t *testing.T) {
	mcp := &mcpjson.File{Path: "/w/.mcp.json"}
	for _, c := range []struct {
		name        string
		merge, yes  bool
		interactive bool
		input       string
		code        int
		want        string
	}{
		{"nothing to merge asks nothing", false, false, false, "", 0, ""},
		{"--yes merges without asking", true, true, false, "", 0, ""},
		{"without a terminal the merge is refused", true, false, false, "", 2, "Run pml init --yes to merge"},
		{"y on a terminal merges", true, false, true, "y\n", 0, ""},
		{"anything else on a terminal refuses", true, false, true, "sure\n", 1, "not merged: nothing was changed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			term := newFakeTerm(c.interactive, strings.NewReader(c.input), nil)
			p := &initPlan{mcp: mcp, merge: c.merge, others: []string{"github"}}
			err := confirmMerge(context.Background(), initOptions{yes: c.yes}, term.terminal, p)
			if exitCode(err) != c.code || (c.want != "" && !strings.Contains(err.Error(), c.want)) {
				t.Fatalf("err = %v (exit %d), want exit %d with %q", err, exitCode(err), c.code, c.want)
			}
			if c.interactive && c.merge && !c.yes && !strings.Contains(term.out.String(), "keeping the other server github") {
				t.Fatalf("the question does not say what is kept: %s", term.out)
			}
		})
	}
}

func TestKeySummary(t *testing.T) {
	for _, c := range []struct {
		name   string
		action keyAction
		want   []string
	}{
		{"a written key names the file and its mode", keySet, []string{"written to /c/pml/credentials (mode 0600)", ".mcp.json can be committed"}},
		{"a moved key says from where to where", keyMove, []string{"moved from .mcp.json to /c/pml/credentials"}},
		{"a stored key says how to replace it", keyStored, []string{"the one in /c/pml/credentials is used", "pml init --api-key KEY replaces it"}},
		{"local mode says how to add a key", keyLocal, []string{"none, local mode", "pml init --api-key KEY"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := keySummary(c.action, "/c/pml/credentials", false)
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("%q does not say %q", got, w)
				}
			}
		})
	}
}

func TestPlanInitComputesEverythingBeforeWriting(t *testing.T) {
	p := newProject(t)
	p.write(".mcp.json", otherServers)
	p.write(".gitignore", "dist/\n")
	before := p.snapshot()
	term := newFakeTerm(false, strings.NewReader(""), nil)
	plan, err := planInit(context.Background(), initOptions{apiKey: testKey, cloudURL: config.DefaultCloudURL}, term.terminal, p.env, p.dir, testExe)
	if err != nil {
		t.Fatal(err)
	}
	if after := p.snapshot(); !equalMaps(before, after) {
		t.Fatalf("planning wrote files: %v", after)
	}
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"the key is to go to the credentials file", plan.action == keySet && plan.writesKey() && plan.credPath == p.credPath()},
		{"the key is not in .mcp.json", !strings.Contains(string(plan.mcp.Bytes()), "PML_API_KEY")},
		{"the existing file is to be merged", plan.merge && strings.Join(plan.others, ",") == "github"},
		{"a new .pml.json is planned", !plan.pmlExists && len(plan.pmlJSON) > 0},
		{"the .gitignore keeps its content and adds the backup, not .mcp.json", strings.HasPrefix(string(plan.gitNew), "dist/\n") && strings.Join(plan.added, " ") == ".pml/ .pml.local.json .mcp.json.backup"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !c.ok {
				t.Fatalf("%+v", plan)
			}
		})
	}
}

func TestReadInitFilesRefusesALinkedStateDir(t *testing.T) {
	p := newProject(t)
	if err := os.Symlink(t.TempDir(), filepath.Join(p.dir, ".pml")); err != nil {
		t.Fatal(err)
	}
	_, _, _, err := readInitFiles(p.env, p.dir, "")
	if exitCode(err) != 2 {
		t.Fatalf("err = %v, want exit 2", err)
	}
}
