#!/usr/bin/env bash
# The e2e package, split in one place (this file) between make test and
# make test-faults (a stage of make test-all, which CI runs right after
# make test: .ci/run):
#
#   bash .ci/e2e.sh first BIN   make test: every e2e test except LATER's,
#                               in three processes at once (SLOW's and the
#                               rest, split in two)
#   bash .ci/e2e.sh later BIN   make test-faults: exactly LATER's tests, each
#                               of which must pass (not be absent, not skip)
#   bash .ci/e2e.sh build BIN   only the compiling first does (make test
#                               runs it while the images are built, then
#                               first with E2E_BUILT=1, which does not
#                               compile again)
#   bash .ci/e2e.sh check       only the check that every listed name is a
#                               test (internal/cicheck runs it in go test)
#
# make test skips LATER (go test -skip) and make test-faults runs LATER
# (-run) with the same regexp, so a test is in exactly one of the two: a
# new test lands in make test unless it is listed here. A name listed here
# that no test has fails both (a renamed test would run in neither).
#
# BIN is the pml under test (PML_BIN); GO overrides go.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:?usage: .ci/e2e.sh first|later|build BIN, or check}
bin=${2:-bin/pml}
go=${GO:-go}
export PML_BIN=$PWD/$bin

# LATER: the fault and matrix tests, out of make test to keep it under 12
# minutes on a fresh machine (CONTRIBUTING.md, "Testing"). Each proves how
# pml behaves when the engine or the disk fails, or repeats a path make
# test proves once over a matrix; make test keeps a test of each feature
# area on the ordinary path (sandbox, approvals, pins, egress, serve,
# stdio, servers). Most need a dockerd of the tests' own (the fault
# engine, faultengine_test.go, or the VM-like one, vmengine_test.go),
# whose start is seconds and whose tests must run one at a time.
LATER=(
	# pml add killed with SIGKILL at a dozen points, a real npm install
	# after each (5 to 12 minutes); and killed exactly between its install
	# and its record (45 s on a fresh machine, a real npm install).
	TestAKilledAddChangesNothing
	TestAnAddKilledBetweenItsInstallAndItsRecordLeavesNoUnrecordedInstall
	# pml stopped five ways (stdin closed, SIGTERM, SIGINT, SIGKILL after
	# SIGTERM, SIGKILL) at four moments of its pool's refills, 20 sessions
	# one after the other (70 s of make test's on a fresh machine); make
	# test keeps the ordinary stop's (TestNothingIsLeftWhenTheSessionEnds,
	# TestAPreStartInFlightIsGoneWhenTheSessionEnds, TestACallIsGoneWhenTheClientKillsSoonAfterSIGTERM).
	TestNothingLeftWhenPMLStopsDuringRefills
	# pml stdio killed with SIGKILL while it makes a standby container
	# (sandbox.standby): what it leaves ends by itself.
	TestStandbyPMLKilledWhileMakingOne
	# The fault engine frozen (SIGSTOP), restarted, offline.
	TestCallTimeoutWithTheEngineFrozenBeforeTheCall
	TestCallTimeoutWithTheEngineFrozenDuringTheCall
	TestCallTimeoutCoversTheReapOfAKilledPml
	TestEngineRestartedMidSession
	TestTheFaultEngineLeavesTheHostsLinksAlone
	TestAServerWhoseImageIsMissingOnAnOfflineEngineExits5
	TestAStandbyOnAFrozenEngine
	# A full disk (a small tmpfs of the test's own).
	TestAWriteThatOverflowsTheDiskLeavesTheFileAsItWas
	TestACallWhoseAuditEntryCannotBeWrittenDoesNotRun
	TestABurstOverStdioOnAFullDiskRunsOnlyAuditedCalls
	TestABurstOverServeOnAFullDiskRunsOnlyAuditedCalls
	TestAcceptingADriftOnAFullDiskChangesNothing
	TestAStandbyClaimedOnAFullDisk
	# The VM-like engine (Docker Desktop, Colima): egress through the
	# egress container, the shared path proven, the doctor's verdict.
	TestShellExecOnAVMEngineReachesOnlyTheAllowedHostThroughTheEgressContainer
	TestAServerOnAVMEngineReachesOnlyItsAllowedHostThroughTheEgressContainer
	TestPMLCleanupRemovesTheEgressContainerOfAKilledPML
	TestDoctorTellsAVMEngineByProof
	TestAWorkspaceOutsideTheShareIsRefused
	TestASharedPathTheVMDoesNotSeeIsProven
	TestContainersOnAVMEngineReachOnlyTheEgressContainer
	TestANetworkedCallOnAFrozenVMEngineEndsInTime
	TestEachClientImageOnAVMEngineReachesOnlyTheAllowedHost
	TestAHostileHostNameCrossesTheEgressContainerQuoted
	# HTTPS through the egress proxy from every client image (busybox
	# wget, Node, curl); make test keeps busybox wget's, the default shell
	# image's (TestBusyboxWgetReachesAnAllowedHostOverHTTPS).
	TestHTTPSToAnAllowedHostFromEachClientImage
)

# SLOW: make test's longest serial e2e tests (measured, .ci/TESTTIME-NOTES.md),
# run in a process of their own beside the rest (split in two by name,
# below), so that the three end about together (round 62: SLOW 461 s,
# the others 325 and 346; five of SLOW's, 103 s, went to them). Most of their time is waiting (npm's registry, image
# saves and loads, container starts), not CPU. Each process has its own
# XDG directories (TestMain) and every test labels what it creates, as
# on a daemon other people's tests share. A test missing here only runs
# in the other process.
SLOW=(
	TestABundleCarriesAnOfflineProject
	TestListShowsSourceVersionAndState
	TestHostileCommittedDepsRunNothing
	TestAddNPMFromAPrivateRegistry
	TestAddNPMServersFromTheRealRegistry
	TestAddRemoveCleanupPrintJSONAndOneLogFormat
	TestASeedFormatRegistryEntryRuns
	TestCleanupLeavesARunningInstallAlone
	TestHostileStateFilesAreLinks
	TestAFailedCapabilityAddRemovesWhatItInstalled
	TestCallTimeoutOfAServerCallNamesTimeout
	TestImagesSaveLoadThenRunWithTheRegistryStopped
	TestAddOCIServerFromALoopbackRegistry
	TestFastPathForwardsCallsAsBytes
	TestExecuteLocallyExpiryAndTimeout
	TestAServersDepsAreReadOnlyAndTheVouchedTree
	TestAModernClientGetsConformingResultsOverStdio
	TestAddedCapabilitiesAreToolsOfPmlStdio
	TestAPMLBuiltWithoutTheProgramSaysToRunMakeBuild
	TestAnUnpinnedSeedEntryIsResolvedAtFirstInstallAndRecorded
	TestEverySeedShapeIsAToolOfPmlStdio
	TestAnUnreachableIndexIsNamed
	# The two longest parallel tests: they run at this process's end,
	# beside the other's parallel tests.
	TestHostileServerFastPathAnswersAreBoundAndRebuilt
	TestHostileHugeOutputKeepsPMLFlat
	# It builds a pml of its own and a toolbox image (and expects exactly
	# one new pml/toolbox image during its call).
	TestTheToolboxImageIsBuiltWhenMissing
)

re() { local IFS='|'; echo "^($*)\$"; }
later_re=$(re "${LATER[@]}")

# Every listed name must be a test of the e2e package.
for name in "${LATER[@]}" "${SLOW[@]}"; do
	if ! grep -q "^func $name(t \*testing.T)" e2e/*_test.go; then
		echo "e2e.sh: $name is listed in .ci/e2e.sh but no e2e test has that name (renamed? update the list)" >&2
		exit 1
	fi
done

case $mode in
check) exit 0 ;;
later)
	log=$(mktemp /tmp/pml-e2e-later-XXXXXX.log)
	rc=0
	"$go" test -race -count=1 -timeout 30m -v -run "$later_re" ./e2e 2>&1 | tee "$log" || rc=$?
	missing=()
	for name in "${LATER[@]}"; do
		grep -q "^--- PASS: $name " "$log" || missing+=("$name")
	done
	if [ "${#missing[@]}" -gt 0 ]; then
		echo "e2e.sh: these tests of LATER did not pass (failed, skipped or absent; log: $log): ${missing[*]}" >&2
		exit 1
	fi
	exit $rc
	;;
first | build) ;;
*)
	echo "usage: .ci/e2e.sh first|later|build BIN, or check" >&2
	exit 2
	;;
esac

t0=$(date +%s)
# build (make test runs it first, then first with E2E_BUILT=1, the images
# being built meanwhile), or first without E2E_BUILT: the packages under
# e2e/ other than e2e itself (test servers: none has tests today; any that
# gets some runs here), then the e2e package compiled once.
if [ "$mode" = build ] || [ "${E2E_BUILT:-}" != 1 ]; then
	mapfile -t others < <("$go" list ./e2e/... | grep -v -e '/e2e$')
	# The build's flags (CGO_ENABLED=0, -trimpath), not the race
	# detector: the test binary then reuses every package pml's build
	# compiled (the race build was a compile of the whole tree of its own
	# on make test's path; the tests run pml, which is never a race
	# build). make test-faults (later, above) and make test-race keep it.
	CGO_ENABLED=0 GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath" "$go" test -count=1 -timeout 25m "${others[@]}"
	CGO_ENABLED=0 GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath" "$go" test -c -o bin/e2e.test ./e2e
	echo "e2e.sh: the e2e tests compiled after $(( $(date +%s) - t0 )) s; $(( ${#LATER[@]} )) of them run in make test-faults, not here (.ci/e2e.sh LATER)" >&2
	[ "$mode" = first ] || exit 0
fi
[ -x bin/e2e.test ] || { echo "e2e.sh: E2E_BUILT=1 but there is no bin/e2e.test (run .ci/e2e.sh build first)" >&2; exit 1; }

# The e2e package run as three processes.
logs=$(mktemp -d /tmp/pml-e2e-XXXXXX)
shard() {
	local name=$1
	shift
	local s0
	s0=$(date +%s)
	# go test runs a package's tests in its directory. GOMAXPROCS'
	# parallel tests at a time: four (.ci/TESTTIME-NOTES.md, round 62)
	# were no faster on a loaded fresh machine, and two tests that bound
	# the engine's answer (600 ms) or a pool's refill then failed.
	if (cd e2e && exec ../bin/e2e.test -test.v -test.timeout 25m "$@") >"$logs/$name.log" 2>&1; then
		echo "e2e.sh: the e2e tests ($name) passed in $(( $(date +%s) - s0 )) s" >&2
	else
		echo "e2e.sh: the e2e tests ($name) FAILED after $(( $(date +%s) - s0 )) s; their output:" >&2
		cat "$logs/$name.log" >&2
		echo "e2e.sh: the tests that failed ($name):" >&2
		grep -- '--- FAIL: ' "$logs/$name.log" >&2 || echo "  none said FAIL: the process ended (a panic or the timeout, above)" >&2
		return 1
	fi
}
slow_args=(-test.run '^$')
rest_skip=$later_re
if [ "${#SLOW[@]}" -gt 0 ]; then
	slow_re=$(re "${SLOW[@]}")
	slow_args=(-test.run "$slow_re" -test.skip "$later_re")
	rest_skip=$(re "${LATER[@]}" "${SLOW[@]}")
fi
# The rest in two processes: the tests named Test[AC]… (293 serial tests
# took 473 s one after the other in a fresh machine's run, those 281 s of
# it: .ci/TESTTIME-NOTES.md, round 62) and the others.
split='^Test[AC]'
shard slow "${slow_args[@]}" &
slow=$!
shard rest-ac -test.run "$split" -test.skip "$rest_skip" &
rest_ac=$!
shard rest -test.skip "$rest_skip|$split" &
rest=$!
rc=0
wait $slow || rc=1
wait $rest_ac || rc=1
wait $rest || rc=1
# Where the time went: the slowest tests of all three. sed, not head: head
# exits after 15 lines and sort, still writing, died of SIGPIPE, which
# pipefail made the exit status of a run whose tests all passed (seen
# in .ci/fresh.sh's third run).
echo "e2e.sh: the slowest e2e tests (logs: $logs):" >&2
grep -h '^--- \(PASS\|FAIL\|SKIP\): ' "$logs"/*.log | sed 's/^--- \([A-Z]*\): \([^ ]*\) (\([0-9.]*\)s)/\3 \2 \1/' | sort -rn | sed -n '1,15s/^/  /p' >&2
exit $rc
