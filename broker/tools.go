package broker

import tl "github.com/pml-dev/pml/broker/tools"

// The tool table, its entries and the tool list live in package tools
// (imported as tl: broker's own fields and variables are often named
// tools); these names keep broker's code and its facade as they were.
type (
	Tool         = tl.Tool
	Listed       = tl.Listed
	toolsCache   = tl.Cache
	toolEntry    = tl.Entry
	executor     = tl.Executor
	executorFunc = tl.ExecutorFunc
)
