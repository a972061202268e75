package broker

import tl "github.com/pml-dev/pml/broker/tools"

// The servers' cached tool lists live in package tools (imported as tl:
// broker's own fields and variables are often named tools).
type toolsCache = tl.Cache
