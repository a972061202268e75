package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/pml-dev/pml/images"
)

// execRoot runs a fresh root command and returns its stdout and the exit
// code main would use.
func execRoot(t *testing.T, args ...string) (string, int, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return out.String(), 0, nil
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return out.String(), ee.code, err
	}
	return out.String(), 1, err
}

// eachCommand visits every command of the tree a person can type flags to
// (the hidden commands that take their own argv are left out).
func eachCommand(c *cobra.Command, fn func(*cobra.Command)) {
	if !c.DisableFlagParsing {
		fn(c)
	}
	for _, s := range c.Commands() {
		eachCommand(s, fn)
	}
}

func TestAnUnknownFlagIsAUsageErrorOnEveryCommand(t *testing.T) {
	var paths [][]string
	eachCommand(newRoot(), func(c *cobra.Command) {
		p := strings.Fields(c.CommandPath())[1:]
		paths = append(paths, p)
	})
	if len(paths) < 15 {
		t.Fatalf("only %d commands found", len(paths))
	}
	for _, p := range paths {
		_, code, err := execRoot(t, append(append([]string{}, p...), "--no-such-flag")...)
		if code != exitUsage {
			t.Errorf("pml %s --no-such-flag: exit %d (%v), want %d", strings.Join(p, " "), code, err, exitUsage)
		}
	}
}

func TestArgumentValidatorsGiveUsageErrors(t *testing.T) {
	root := newRoot()
	n := 0
	eachCommand(root, func(c *cobra.Command) {
		if c.Args == nil {
			return
		}
		for _, args := range [][]string{nil, {"a", "b", "c", "d"}} {
			err := c.ValidateArgs(args)
			if err == nil {
				continue
			}
			n++
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != exitUsage {
				t.Errorf("%s %v: %v is not a usage error", c.CommandPath(), args, err)
			}
		}
	})
	if n < 15 {
		t.Errorf("only %d refused argument lists checked", n)
	}
}

func TestUnknownSubcommandsAreUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"nosuch"}, {"images", "nosuch"}, {"registry", "nosuch"}} {
		_, code, err := execRoot(t, args...)
		if code != exitUsage || !strings.Contains(err.Error(), `unknown command "nosuch"`) || !strings.Contains(err.Error(), "--help' for usage") {
			t.Errorf("pml %v: exit %d, %v", args, code, err)
		}
	}
	_, _, err := execRoot(t, "doctr")
	if err == nil || !strings.Contains(err.Error(), "did you mean doctor?") {
		t.Errorf("no suggestion: %v", err)
	}
	// A group called bare shows its help, as before.
	if out, code, err := execRoot(t, "images"); code != 0 || !strings.Contains(out, "Available Commands") {
		t.Errorf("pml images: exit %d (%v)\n%s", code, err, out)
	}
}

func TestBadFlagValuesAreUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"version", "--format", "yaml"},
		{"doctor", "--format", "xml"},
		{"list", "--json", "--format", "table"},
		{"images", "pull", "--parallel", "0"},
		{"images", "pull", "--parallel", "many"},
		{"--log-level", "loud", "version"},
		{"--log-format", "pretty", "version"},
	} {
		if _, code, err := execRoot(t, args...); code != exitUsage {
			t.Errorf("pml %v: exit %d (%v), want 2", args, code, err)
		}
	}
}

func TestVersionFlagAndCommandAgree(t *testing.T) {
	a, code, err := execRoot(t, "--version")
	if code != 0 {
		t.Fatal(err)
	}
	b, _, _ := execRoot(t, "version")
	if a != b || !strings.HasPrefix(a, "pml "+version) {
		t.Errorf("--version %q, version %q", a, b)
	}
	j, _, _ := execRoot(t, "version", "--format", "json")
	var v versionInfo
	if err := json.Unmarshal([]byte(j), &v); err != nil || v.Version != version || v.Go == "" || v.OS == "" || v.Arch == "" {
		t.Errorf("version --format json: %v\n%s", err, j)
	}
}

func TestDebugFlagSetsTheLogLevel(t *testing.T) {
	g := &globals{logLevel: "warn", logFormat: "json", debug: true}
	if l := g.logger().GetLevel(); l.String() != "debug" {
		t.Errorf("-D: level %s", l)
	}
	g.debug = false
	if l := g.logger().GetLevel(); l.String() != "warn" {
		t.Errorf("without -D: level %s", l)
	}
}

func TestPullReport(t *testing.T) {
	ref, err := images.ParseRef("example.org/a:v1")
	if err != nil {
		t.Fatal(err)
	}
	w := images.Want{Ref: ref, Source: images.SourceRegistry, UsedBy: []string{".pml.json mcps.a"}}
	r := pullReport([]images.Result{
		{Want: w, Status: images.StatusPulled, Digest: "sha256:ab", Elapsed: 2 * time.Second, Image: images.Image{Size: 10}},
	}, nil)
	if !r.OK || len(r.Images) != 1 || r.Images[0].Image != "example.org/a:v1" || r.Images[0].Seconds != 2 || r.Dependencies == nil {
		t.Errorf("%+v", r)
	}
	r = pullReport([]images.Result{{Want: w, Status: images.StatusFailed, Err: errors.New("no such image")}}, []depRow{{Server: "a", Status: "installed"}})
	if r.OK || r.Images[0].Error != "no such image" {
		t.Errorf("%+v", r)
	}
	if r = pullReport(nil, []depRow{{Server: "a", Status: "failed", Error: "x"}}); r.OK {
		t.Errorf("a failed dependency left ok: %+v", r)
	}
}
