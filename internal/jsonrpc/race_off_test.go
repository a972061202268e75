//go:build !race

package jsonrpc

const raceOn = false
