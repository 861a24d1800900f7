package lazyre

import (
	"sync"
	"testing"
)

func TestCompilesOnceOnFirstUse(t *testing.T) {
	r := New(`^a(b+)$`)
	if r.String() != `^a(b+)$` {
		t.Fatalf("String = %q", r.String())
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if m := r.FindStringSubmatch("abbb"); len(m) != 2 || m[1] != "bbb" {
				t.Errorf("FindStringSubmatch = %q", m)
			}
		}()
	}
	wg.Wait()
	if r.Re() != r.Re() {
		t.Fatal("compiled twice")
	}
	if r.MatchString("ac") {
		t.Fatal("ac matched ^a(b+)$")
	}
}

func TestCompileReportsABadExpression(t *testing.T) {
	if _, err := New(`a(`).Compile(); err == nil {
		t.Fatal("a( compiled")
	}
	if re, err := New(`a+`).Compile(); err != nil || !re.MatchString("aa") {
		t.Fatalf("a+: %v, %v", re, err)
	}
}

func TestBadExpressionPanicsOnFirstUse(t *testing.T) {
	r := New(`a(`) // no panic yet: nothing is compiled at New
	defer func() {
		if recover() == nil {
			t.Fatal("a bad expression did not panic on use")
		}
	}()
	r.MatchString("a")
}
