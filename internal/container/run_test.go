package container_test

import (
	"bytes"
	"context"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/container/containertest"
)

func TestRunCollectsOutputAndRemovesTheContainer(t *testing.T) {
	rt := &containertest.Runtime{Behave: behave(func(in io.Reader, out, errw io.Writer, _ <-chan struct{}) int {
		b, _ := io.ReadAll(in)
		io.WriteString(out, "got:"+string(b))
		io.WriteString(errw, "warn")
		return 7
	})}
	res, err := Run(context.Background(), rt, Spec{}, []byte("ping"), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "got:ping" || string(res.Stderr) != "warn" || res.Exit.Code != 7 || res.Truncated || res.TimedOut {
		t.Errorf("res = %+v", res)
	}
	if len(rt.Removed()) != 1 {
		t.Errorf("removed = %v", rt.Removed())
	}
}

func TestRunKillsAtTheDeadline(t *testing.T) {
	rt := &containertest.Runtime{Behave: behave(func(_ io.Reader, out, _ io.Writer, killed <-chan struct{}) int {
		io.WriteString(out, "partial")
		<-killed
		return 137
	})}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	res, err := Run(ctx, rt, Spec{}, nil, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.Cancelled || string(res.Stdout) != "partial" || len(rt.Removed()) != 1 {
		t.Errorf("res = %+v removed=%v", res, rt.Removed())
	}
}

func TestRunReportsACancellation(t *testing.T) {
	rt := &containertest.Runtime{Behave: behave(func(_ io.Reader, _, _ io.Writer, killed <-chan struct{}) int { <-killed; return 137 })}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	res, _ := Run(ctx, rt, Spec{}, nil, 1<<20)
	if !res.Cancelled || res.TimedOut {
		t.Errorf("res = %+v", res)
	}
}

func TestRunCapsOutputAndStopsTheProcess(t *testing.T) {
	rt := &containertest.Runtime{Behave: behave(func(_ io.Reader, out, _ io.Writer, killed <-chan struct{}) int {
		chunk := bytes.Repeat([]byte("x"), 1000)
		for {
			select {
			case <-killed:
				return 137
			default:
				out.Write(chunk)
			}
		}
	})}
	res, err := Run(context.Background(), rt, Spec{}, nil, 10_500)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Truncated || len(res.Stdout) != 10_500 || strings.Trim(string(res.Stdout), "x") != "" {
		t.Errorf("truncated=%v len=%d", res.Truncated, len(res.Stdout))
	}
}

func TestReapRemovesOnlyOrphansOfThisHost(t *testing.T) {
	self := Self()
	dead := Owner{PID: self.PID, Start: self.Start + 1, Host: self.Host, HostID: self.HostID} // reused pid
	otherHost := Owner{PID: 1, Start: 1, Host: self.Host + "-elsewhere", HostID: "other"}
	// Another CI runner with the same host name: its pid means nothing here.
	sameName := Owner{PID: 1, Start: 1, Host: self.Host, HostID: "runner-b"}
	legacyDead := Owner{PID: self.PID, Start: self.Start + 1, Host: self.Host}
	old := time.Now().Add(-2 * ForeignAge)
	rt := &containertest.Runtime{Managed: []Managed{
		{ID: "mine-live", Labels: self.Labels(), Running: true},
		{ID: "orphan", Labels: dead.Labels(), Running: true},
		{ID: "other-host", Labels: otherHost.Labels(), Running: true, Created: old},
		{ID: "same-name-other-host", Labels: sameName.Labels(), Running: true, Created: old},
		{ID: "same-name-other-host-new", Labels: sameName.Labels(), Created: time.Now()},
		{ID: "other-host-stopped-old", Labels: sameName.Labels(), Created: old},
		{ID: "legacy-orphan", Labels: legacyDead.Labels(), Running: true},
		{ID: "unlabelled", Labels: map[string]string{LabelManaged: "true"}},
	}}
	n, err := Reap(context.Background(), rt, self)
	want := []string{"orphan", "other-host-stopped-old", "legacy-orphan"}
	if err != nil || n != len(want) || !slices.Equal(rt.Removed(), want) {
		t.Errorf("n=%d err=%v removed=%v, want %v", n, err, rt.Removed(), want)
	}
}
