//go:build race

package jsonrpc

// raceOn: the race detector's instrumentation makes values escape that
// otherwise stay on the stack (allocation counts do not hold).
const raceOn = true
