package safefs

func setWalk(on bool) { forceWalk.Store(on) }
