package container

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Owner identifies the pml process that created a container. A pid alone is
// a weak identity (pids are reused), so it is paired with the process start
// time from /proc, and both only mean something where the owner's /proc is
// this process's /proc: HostID names that place (see HostID).
type Owner struct {
	PID   int
	Start uint64 // clock ticks since boot, field 22 of /proc/PID/stat
	// Host is the host name, for people reading labels; it identifies
	// nothing (two CI runners are both called "runner").
	Host string
	// HostID is where PID and Start can be checked (see HostID); empty in
	// labels written by pml versions before it.
	HostID string
}

// HostIDEnv overrides the host identity. It exists for tests that play
// two hosts sharing one daemon; nothing else should set it.
const HostIDEnv = "PML_HOST_ID"

var hostIDOnce = sync.OnceValue(computeHostID)

// HostID identifies the place where this process's pids mean something:
// the machine (/etc/machine-id), its current boot
// (/proc/sys/kernel/random/boot_id) and the pid namespace. Two CI runners
// named alike that share a daemon differ in at least one of these (two
// containers on one kernel share the boot id but not the pid namespace),
// so neither takes the other's pids for its own. The parts are hashed: a
// label shows no machine id.
func HostID() string { return hostIDOnce() }

func computeHostID() string {
	if v := os.Getenv(HostIDEnv); v != "" {
		return v
	}
	read := func(p string) string {
		b, _ := os.ReadFile(p)
		return strings.TrimSpace(string(b))
	}
	ns, _ := os.Readlink("/proc/self/ns/pid")
	parts := []string{read("/etc/machine-id"), read("/proc/sys/kernel/random/boot_id"), ns}
	if strings.Join(parts, "") == "" {
		// Not Linux (or no /proc): the host name is all there is.
		h, _ := os.Hostname()
		parts = []string{"hostname", h}
	}
	sum := sha256.Sum256([]byte("pml-host-id\x00" + strings.Join(parts, "\x00")))
	return hex.EncodeToString(sum[:16])
}

// Self returns the identity of the running process.
func Self() Owner {
	host, _ := os.Hostname()
	pid := os.Getpid()
	start, _ := processStart(pid)
	return Owner{PID: pid, Start: start, Host: host, HostID: HostID()}
}

// Labels returns the owner labels plus LabelManaged.
func (o Owner) Labels() map[string]string {
	l := map[string]string{
		LabelManaged:    "true",
		LabelOwnerPID:   strconv.Itoa(o.PID),
		LabelOwnerStart: strconv.FormatUint(o.Start, 10),
		LabelOwnerHost:  o.Host,
	}
	if o.HostID != "" {
		l[LabelOwnerHostID] = o.HostID
	}
	return l
}

// OwnerFromLabels reads an Owner back; ok is false when the labels are
// incomplete (then the container is not ours to judge). Labels of older
// pml versions have no host id: HostID is then empty.
func OwnerFromLabels(l map[string]string) (Owner, bool) {
	pid, err1 := strconv.Atoi(l[LabelOwnerPID])
	start, err2 := strconv.ParseUint(l[LabelOwnerStart], 10, 64)
	if err1 != nil || err2 != nil || l[LabelOwnerHost] == "" {
		return Owner{}, false
	}
	return Owner{PID: pid, Start: start, Host: l[LabelOwnerHost], HostID: l[LabelOwnerHostID]}, true
}

// Alive reports whether the owner process still runs: same pid and same
// start time, and not ended. A pml that exited but whose parent (the
// client that started it) has not waited for it yet is a zombie: its
// /proc entry, start time included, stays until it is reaped, which a
// client that never waits does only when it exits itself. It runs
// nothing any more, so its containers are no one's.
func (o Owner) Alive() bool {
	start, state, err := processStat(o.PID)
	return err == nil && start == o.Start && !ended(state)
}

// ended reports whether a process state of /proc/PID/stat is one of a
// process that has exited: Z (zombie) or X (dead).
func ended(state byte) bool { return state == 'Z' || state == 'X' }

// processStart reads the start time of pid from /proc/PID/stat.
func processStart(pid int) (uint64, error) {
	start, _, err := processStat(pid)
	return start, err
}

// processStat reads the start time and the state of pid from
// /proc/PID/stat.
func processStat(pid int) (start uint64, state byte, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	return parseStat(string(b))
}

// parseStat extracts field 3 (state) and field 22 (starttime). The
// command name (field 2) is in parentheses and may itself contain spaces
// and parentheses, so the fields are counted from the last ')'.
func parseStat(stat string) (start uint64, state byte, err error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("malformed /proc stat line")
	}
	fields := strings.Fields(stat[i+1:])
	// fields[0] is field 3 (state); starttime is field 22.
	const idx = 22 - 3
	if len(fields) <= idx || len(fields[0]) != 1 {
		return 0, 0, fmt.Errorf("malformed /proc stat line: %d fields", len(fields))
	}
	start, err = strconv.ParseUint(fields[idx], 10, 64)
	return start, fields[0][0], err
}
