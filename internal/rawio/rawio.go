// Package rawio reads and writes the descriptors of a warm call (the
// client's pipes, the server's socket, the audit log) with system calls
// that do not go through the Go runtime's syscall bookkeeping.
//
// Why: between two calls `pml stdio` has nothing to run, and the
// runtime's monitor thread (sysmon) then goes to a deep sleep. The next
// ordinary system call (syscall.Syscall: entersyscall) wakes it, and once
// woken it polls every 20 µs while pml works, on the processor the client
// and the server need. A warm call makes a dozen such calls in two bursts
// (the request, then the answer), each of which woke it: measured on two
// CPUs, that was 43 of pml's 143 µs of CPU per call, 6 % of the warm
// call's time and 13 % of 64 callers' (docs/performance.md).
//
// A raw system call is safe only where it cannot block: a descriptor in
// non-blocking mode, waited on through Go's poller (syscall.RawConn,
// which still parks the goroutine, never the thread), or a call that
// returns at once (fstat, an epoll_wait with no timeout, a write to a
// regular file, which waits on no other process).
package rawio
