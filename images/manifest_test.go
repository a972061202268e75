package images

import (
	"strings"
	"testing"
)

func TestTheEmbeddedManifestParsesAndPinsEveryRegistryImage(t *testing.T) {
	m, err := LoadManifest("")
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Pinned{}
	for _, p := range m.Images {
		byName[p.Name] = p
		if p.Source == SourceRegistry && !digestRE.MatchString(p.Digest) {
			t.Errorf("%s is pulled but not pinned by digest", p.Name)
		}
		if p.Build == "" {
			t.Errorf("%s does not say how to build it without a registry", p.Name)
		}
	}
	for _, name := range []string{"toolbox", "shell", "node", "deno", "deno-upstream"} {
		if _, ok := byName[name]; !ok {
			t.Errorf("the manifest does not list %s", name)
		}
	}
	if tb := byName["toolbox"]; tb.Ref != ToolboxRepo+":"+ExePlaceholder || tb.Source != SourceLocal || tb.Needed != NeededAlways {
		t.Errorf("toolbox = %+v", tb)
	}
	if byName["shell"].Ref != ShellRef {
		t.Errorf("the shell entry must be the default shell image %s", ShellRef)
	}
}

func TestManifestErrorsSayWhatIsWrong(t *testing.T) {
	d := "sha256:" + strings.Repeat("a", 64)
	cases := []struct{ name, yaml, want string }{
		{"empty", "", "is empty"},
		{"version", "version: 2\nimages: []\n", "version is 2"},
		{"unknown key", "version: 1\nimages:\n- name: a\n  ref: a:1\n  source: registry\n  digset: " + d + "\n", "digset"},
		{"registry without digest", "version: 1\nimages:\n- name: a\n  ref: a:1\n  source: registry\n", "needs `digest"},
		{"local with digest", "version: 1\nimages:\n- name: a\n  ref: a:1\n  source: local\n  digest: " + d + "\n", "local image has no registry digest"},
		{"bad digest", "version: 1\nimages:\n- name: a\n  ref: a:1\n  source: registry\n  digest: sha256:XYZ\n", "64 lowercase hex"},
		{"digest in ref", "version: 1\nimages:\n- name: a\n  ref: a@" + d + "\n  source: registry\n  digest: " + d + "\n", "not in ref"},
		{"duplicate name", "version: 1\nimages:\n- {name: a, ref: 'a:1', source: local}\n- {name: a, ref: 'b:1', source: local}\n", "used twice"},
		{"duplicate ref", "version: 1\nimages:\n- {name: a, ref: 'a:1', source: local}\n- {name: b, ref: 'docker.io/library/a:1', source: local}\n", "also listed"},
		{"placeholder outside the tag", "version: 1\nimages:\n- {name: a, ref: 'x/{exe}:1', source: local}\n", "only be the tag"},
		{"no source", "version: 1\nimages:\n- {name: a, ref: 'a:1'}\n", "source is required"},
		{"bad needed", "version: 1\nimages:\n- {name: a, ref: 'a:1', source: local, needed: sometimes}\n", "needed must be"},
		{"bad ref", "version: 1\nimages:\n- {name: a, ref: 'A B', source: local}\n", "image reference"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseManifest([]byte(c.yaml), "test.yaml")
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "test.yaml") {
				t.Errorf("error %q should name the file and say %q", err, c.want)
			}
		})
	}
}

func TestManifestPathFlagBeatsTheEnvironment(t *testing.T) {
	env := func(k string) string {
		if k == ManifestEnv {
			return "/env.yaml"
		}
		return ""
	}
	if got := ManifestPath("/flag.yaml", env); got != "/flag.yaml" {
		t.Errorf("flag: %q", got)
	}
	if got := ManifestPath("", env); got != "/env.yaml" {
		t.Errorf("env: %q", got)
	}
	if got := ManifestPath("", func(string) string { return "" }); got != "" {
		t.Errorf("default must be the embedded manifest, got %q", got)
	}
	if _, err := LoadManifest("/nonexistent/manifest.yaml"); err == nil || !strings.Contains(err.Error(), ManifestEnv) {
		t.Errorf("a missing manifest file must say how it was chosen: %v", err)
	}
}
