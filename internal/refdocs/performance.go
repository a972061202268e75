package refdocs

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
)

// PerformanceFile quotes the bench's report; ReportFile is that report.
const (
	PerformanceFile = "docs/performance.md"
	ReportFile      = "bench/report.md"
)

// The quoted part of PerformanceFile lies between these two lines; the
// rest of the page is written by hand.
const (
	quoteBegin = "<!-- quoted from bench/report.md by `make docs`: its \"Measured\" line and its Targets section; do not edit between these lines -->"
	quoteEnd   = "<!-- end of the quote from bench/report.md -->"
)

// QuoteTargets is page with its quote of the bench's report replaced by
// what report says now: the line that says when and where it was
// measured, and the Targets section. The page never has figures of its
// own that a later bench would leave behind.
func QuoteTargets(page, report []byte) ([]byte, error) {
	start := bytes.Index(page, []byte(quoteBegin))
	end := bytes.Index(page, []byte(quoteEnd))
	if start < 0 || end < start {
		return nil, fmt.Errorf("%s has no %q … %q block to fill", PerformanceFile, quoteBegin, quoteEnd)
	}
	measured, targets, err := reportParts(string(report))
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Write(page[:start])
	b.WriteString(quoteBegin + "\n\n")
	b.WriteString(measured + "\n\n")
	b.WriteString(targets + "\n\n")
	b.Write(page[end:])
	return b.Bytes(), nil
}

// reportParts finds the report's "Measured …" line and the body of its
// "## Targets" section.
func reportParts(report string) (measured, targets string, err error) {
	lines := strings.Split(report, "\n")
	in := false
	var body []string
	for _, l := range lines {
		switch {
		case measured == "" && strings.HasPrefix(l, "Measured "):
			measured = l
		case l == "## Targets":
			in = true
		case in && strings.HasPrefix(l, "## "):
			in = false
		case in:
			body = append(body, l)
		}
	}
	targets = strings.TrimSpace(strings.Join(body, "\n"))
	if measured == "" || targets == "" {
		return "", "", errors.New(ReportFile + " has no \"Measured\" line or no \"## Targets\" section")
	}
	return measured, targets, nil
}
