package container

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Owner identifies the pml process that created a container. A pid alone is
// a weak identity (pids are reused), so it is paired with the process start
// time from /proc and the host name.
type Owner struct {
	PID   int
	Start uint64 // clock ticks since boot, field 22 of /proc/PID/stat
	Host  string
}

// Self returns the identity of the running process.
func Self() Owner {
	host, _ := os.Hostname()
	pid := os.Getpid()
	start, _ := processStart(pid)
	return Owner{PID: pid, Start: start, Host: host}
}

// Labels returns the owner labels plus LabelManaged.
func (o Owner) Labels() map[string]string {
	return map[string]string{
		LabelManaged:    "true",
		LabelOwnerPID:   strconv.Itoa(o.PID),
		LabelOwnerStart: strconv.FormatUint(o.Start, 10),
		LabelOwnerHost:  o.Host,
	}
}

// OwnerFromLabels reads an Owner back; ok is false when the labels are
// incomplete (then the container is not ours to judge).
func OwnerFromLabels(l map[string]string) (Owner, bool) {
	pid, err1 := strconv.Atoi(l[LabelOwnerPID])
	start, err2 := strconv.ParseUint(l[LabelOwnerStart], 10, 64)
	if err1 != nil || err2 != nil || l[LabelOwnerHost] == "" {
		return Owner{}, false
	}
	return Owner{PID: pid, Start: start, Host: l[LabelOwnerHost]}, true
}

// Alive reports whether the owner process still runs: same pid and same
// start time.
func (o Owner) Alive() bool {
	start, err := processStart(o.PID)
	return err == nil && start == o.Start
}

// processStart reads the start time of pid from /proc/PID/stat.
func processStart(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatStart(string(b))
}

// parseStatStart extracts field 22 (starttime). The command name (field 2)
// is in parentheses and may itself contain spaces and parentheses, so the
// fields are counted from the last ')'.
func parseStatStart(stat string) (uint64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed /proc stat line")
	}
	fields := strings.Fields(stat[i+1:])
	// fields[0] is field 3 (state); starttime is field 22.
	const idx = 22 - 3
	if len(fields) <= idx {
		return 0, fmt.Errorf("malformed /proc stat line: %d fields", len(fields))
	}
	return strconv.ParseUint(fields[idx], 10, 64)
}
