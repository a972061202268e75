package main

import "golang.org/x/sys/unix"

// dupOnto makes newfd a copy of oldfd. dup3, not dup2: linux/arm64 has
// no dup2 system call.
func dupOnto(oldfd, newfd int) error { return unix.Dup3(oldfd, newfd, 0) }
