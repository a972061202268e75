//go:build linux

package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestKeysAreNotSentToAPlainHTTPCloud: a project's .pml.json points
// cloud.url at a plain-http host elsewhere. With PML_API_KEY set, a call of
// a cloud tool is refused before anything is dialled (the .invalid host
// could not even be resolved), with an error naming the endpoint and what
// to do, and pml's log says so too. Neither the API key nor a BYOK key
// appears anywhere.
func TestKeysAreNotSentToAPlainHTTPCloud(t *testing.T) {
	const endpoint = "http://pml-cloud.invalid"
	ws := newWorkspace(t, cloudConfig(endpoint, ""))
	ws.write(".env", "TAVILY_API_KEY="+tavilyKey+"\n")
	s := startSession(t, ws, "PML_API_KEY="+cloudKey)
	want := "cloud.url " + endpoint + " is not https; pml sends your API key only over https (or http to loopback)"
	// json is server-routed by the embedded table: the call goes to the
	// cloud whether or not the cloud's list arrived.
	out, res := s.call(t, "json:parse", map[string]any{"text": "{}"})
	if !res.IsError || !strings.Contains(out, want) {
		t.Fatalf("json:parse with a plain-http cloud.url: %q, want an error containing %q", out, want)
	}
	if strings.Contains(out, "cannot be reached") {
		t.Errorf("the refusal reads as a network failure: %q", out)
	}
	waitFor(t, "pml's log to name the refused endpoint", 10*time.Second, func() bool {
		return strings.Contains(s.stderr.String(), want)
	})
	_ = s.Close()
	_ = s.cmd.Wait()
	secretsAbsent(t, ws, s.stderr.String(), cloudKey, tavilyKey)
}
