package refdocs

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// update makes the drift tests write the pages instead: `make docs`.
var update = flag.Bool("update", false, "write the generated reference pages instead of comparing them")

// TestConfigurationReferenceIsCurrent fails when docs/configuration.md
// is not what Configuration writes now: a key or a variable was added,
// changed or removed without `make docs`.
func TestConfigurationReferenceIsCurrent(t *testing.T) {
	path := filepath.Join("..", "..", ConfigurationFile)
	same, err := Compare(path, Configuration(), *update)
	if err != nil {
		t.Fatalf("%v (run `make docs` to write it)", err)
	}
	if !same {
		t.Fatal(Drift(ConfigurationFile))
	}
}

// TestPerformanceQuotesTheBench fails when docs/performance.md's quote of
// bench/report.md (its Targets table) is not what the report says now.
func TestPerformanceQuotesTheBench(t *testing.T) {
	root := filepath.Join("..", "..")
	page, err := os.ReadFile(filepath.Join(root, PerformanceFile))
	if err != nil {
		t.Fatal(err)
	}
	report, err := os.ReadFile(filepath.Join(root, ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	want, err := QuoteTargets(page, report)
	if err != nil {
		t.Fatal(err)
	}
	same, err := Compare(filepath.Join(root, PerformanceFile), want, *update)
	if err != nil {
		t.Fatal(err)
	}
	if !same {
		t.Fatal(Drift(PerformanceFile) + " (its quote of " + ReportFile + ")")
	}
}

func TestQuoteTargetsNeedsItsMarkers(t *testing.T) {
	if _, err := QuoteTargets([]byte("# Performance\n"), []byte("Measured now.\n\n## Targets\n\n| a |\n")); err == nil {
		t.Fatal("a page without the quote's markers was accepted")
	}
	if _, err := QuoteTargets([]byte(quoteBegin+"\n"+quoteEnd+"\n"), []byte("# report\n")); err == nil {
		t.Fatal("a report without Targets was accepted")
	}
}
