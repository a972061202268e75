package lazyre

import (
	"strings"
	"sync"
	"testing"
)

func TestALazyRegexpBehavesLikeTheCompiledOne(t *testing.T) {
	re := New(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)
	if !re.MatchString("a ${HOME} b") || re.MatchString("$HOME") {
		t.Error("MatchString")
	}
	if got := re.FindStringSubmatch("x ${USER}"); len(got) != 2 || got[1] != "USER" {
		t.Errorf("FindStringSubmatch: %q", got)
	}
	if got := re.FindAllStringSubmatch("${A} ${B}", -1); len(got) != 2 || got[1][1] != "B" {
		t.Errorf("FindAllStringSubmatch: %q", got)
	}
	if got := re.ReplaceAllString("${A}!", "v"); got != "v!" {
		t.Errorf("ReplaceAllString: %q", got)
	}
	if got := re.ReplaceAllStringFunc("${a}", strings.ToUpper); got != "${A}" {
		t.Errorf("ReplaceAllStringFunc: %q", got)
	}
	if re.String() != `\$\{([A-Za-z_][A-Za-z0-9_]*)\}` {
		t.Errorf("String: %q", re.String())
	}
}

func TestConcurrentFirstUsesCompileOnce(t *testing.T) {
	re := New(`^[a-z]{0,62}$`)
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !re.MatchString("abc") {
				t.Error("no match")
			}
		}()
	}
	wg.Wait()
	if first, again := re.re(), re.re(); first != again {
		t.Error("compiled more than once")
	}
}

func TestAnInvalidPatternPanicsAtFirstUse(t *testing.T) {
	re := New(`(`)
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	re.MatchString("x")
}
