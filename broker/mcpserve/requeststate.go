package mcpserve

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"crypto/rand"
	"encoding/hex"

	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/internal/trust"
	"github.com/pml-dev/pml/internal/vouch"
)

// The requestState of pml serve's stateless era (MCP 2026-07-28).
//
// A modern client over pml serve may send each request to another pml
// serve process of the workspace (behind a load balancer), so an
// approval asked on one is answered on another: what the answer needs
// travels in the request. pml's input_required result carries, as its
// requestState, the approval it asked about (the tool, its arguments,
// the kind of approval, when it expires, a nonce), sealed with an
// HMAC-SHA256 under the user's vouching key (internal/vouch: 0600 in
// pml's state directory, never in the workspace) over the workspace's
// path and the record. The client reads it but cannot change it: a
// state whose MAC does not verify (forged, edited, from another
// workspace) is refused and runs nothing. A state is answered once: its
// nonce is recorded, on answering, in pml's state directory
// (answered/NONCE, created exclusively, so two processes answering the
// same state at once let one through), and a replay is refused.
//
// The process that answers re-asks: it runs the call the state names
// again up to its approval (which creates the same question in this
// process: the same checks, the same payload), then applies the
// person's answer to it. An approval of a run of code (pml:execute) is
// answered only on the process that paused the run: the run lives
// there.

// stateKind is the record kind the MAC covers (internal/vouch).
const stateKind = "mcp-request-state"

// statePrefix starts every requestState pml serve seals.
const statePrefix = "pml1."

// sealedState is what a requestState carries.
type sealedState struct {
	Nonce    string          `json:"n"`
	Workflow string          `json:"w"` // the asking process's workflow
	Tool     string          `json:"t"` // pml's name of the tool
	Type     string          `json:"k"` // the approval's type
	Args     json.RawMessage `json:"a,omitempty"`
	Expires  int64           `json:"e"` // unix seconds
	// Run: the approval pauses a run of code, which lives in the asking
	// process only.
	Run bool `json:"r,omitempty"`
}

// sealState makes the requestState of an approval a asked in workspace ws
// for the call of tool with args; ttl is how long approvals last, for one
// that names no expiry.
func sealState(ws, tool string, args json.RawMessage, a workflow.Approval, ttl time.Duration) (string, error) {
	if a.ExpiresAt.IsZero() {
		// An approval that names no expiry lasts as long as any.
		a.ExpiresAt = time.Now().Add(ttl)
	}
	nonce := make([]byte, 16)
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	run, _ := a.Context["run"].(string)
	js, err := json.Marshal(sealedState{Nonce: hex.EncodeToString(nonce), Workflow: a.WorkflowID, Tool: tool,
		Type: string(a.ApprovalType), Args: args, Expires: a.ExpiresAt.Unix(), Run: run != ""})
	if err != nil {
		return "", err
	}
	body := base64.RawURLEncoding.EncodeToString(js)
	sum, err := vouch.Seal(ws, stateKind, "", []byte(body))
	if err != nil {
		return "", err
	}
	return statePrefix + body + "." + sum, nil
}

// errForged: a requestState pml did not seal for this workspace.
var errForged = errors.New("this requestState was not issued by pml for this workspace (its seal does not verify: it was made up, edited, or issued for another workspace or user); nothing was run. Call the tool again without requestState to be asked again")

// openState verifies raw and returns what it carries.
func openState(ws, raw string, now time.Time) (sealedState, error) {
	var s sealedState
	rest, ok := strings.CutPrefix(raw, statePrefix)
	if !ok {
		return s, errForged
	}
	body, sum, ok := strings.Cut(rest, ".")
	if !ok || !vouch.Check(ws, stateKind, "", []byte(body), sum) {
		return s, errForged
	}
	js, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil || json.Unmarshal(js, &s) != nil || s.Nonce == "" || s.Tool == "" {
		return s, errForged
	}
	if now.Unix() > s.Expires {
		return s, fmt.Errorf("this approval expired at %s (approvals are valid for a limited time); nothing was run. Call the tool again to be asked again",
			time.Unix(s.Expires, 0).UTC().Format(time.RFC3339))
	}
	return s, nil
}

// answeredDir holds the nonces of the states answered.
func answeredDir() (string, error) {
	dir, err := trust.Dir(vouch.Getenv)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "answered"), nil
}

// errReplayed: a requestState answered before.
var errReplayed = errors.New("this requestState was answered already (a replay); nothing was run. Call the tool again to be asked again")

// markAnswered records that s is being answered, once: errReplayed when
// it was before. Records older than a day are removed on the way (a
// state expires with its approval, well before).
func markAnswered(s sealedState, now time.Time) error {
	dir, err := answeredDir()
	if err != nil {
		return fmt.Errorf("pml cannot record the answer: %w; nothing was run", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("pml cannot record the answer in %s: %w; nothing was run", dir, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, s.Nonce), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return errReplayed
	}
	if err != nil {
		return fmt.Errorf("pml cannot record the answer in %s: %w; nothing was run", dir, err)
	}
	_ = f.Close()
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 64 {
		for _, e := range entries {
			if fi, err := e.Info(); err == nil && now.Sub(fi.ModTime()) > 24*time.Hour {
				_ = os.Remove(filepath.Join(dir, e.Name()))
			}
		}
	}
	return nil
}
