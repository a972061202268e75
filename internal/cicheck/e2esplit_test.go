package cicheck

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// TestEveryE2ETestRunsInOneStage: make test runs the e2e tests except
// .ci/e2e.sh's LATER, and make test-faults exactly LATER, a stage of make
// test-all, which .ci/run runs after make test. A name LATER or SLOW lists
// must be a test (a renamed one would run in neither), and each half must
// stay wired to its stage: a test left out of make test must run in CI.
func TestEveryE2ETestRunsInOneStage(t *testing.T) {
	cmd := exec.Command("bash", ".ci/e2e.sh", "check")
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("bash .ci/e2e.sh check: %v\n%s", err, out)
	}
	read := func(p string) string {
		b, err := os.ReadFile("../../" + p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if test := read(".ci/test.sh"); !strings.Contains(test, "bash .ci/e2e.sh first") {
		t.Error(".ci/test.sh (make test) does not run the e2e tests with .ci/e2e.sh first")
	}
	mk := read("Makefile")
	if !regexp.MustCompile(`(?m)^test-faults:.*\n(\t.*\n)*\t.*bash \.ci/e2e\.sh later `).MatchString(mk) {
		t.Error("make test-faults does not run .ci/e2e.sh later: the tests make test leaves out would run nowhere")
	}
	stages := regexp.MustCompile(`(?m)^TEST_ALL_STAGES := (.*)$`).FindStringSubmatch(mk)
	if stages == nil || !strings.Contains(" "+stages[1]+" ", " test-faults ") {
		t.Errorf("make test-all's stages (TEST_ALL_STAGES) lack test-faults: %q", stages)
	}
	run := read(".ci/run")
	i, j := strings.Index(run, "\nmake test\n"), strings.Index(run, "make test-all")
	if i < 0 || j < i {
		t.Error(".ci/run does not run make test and then make test-all")
	}
}
