package lock

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestTry(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run", "healthcheck.lock")
	l, err := Try(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Try(path); !errors.Is(err, ErrHeld) {
		t.Fatalf("second Try: want ErrHeld, got %v", err)
	}
	pid, since, err := Holder(path)
	if err != nil || pid != os.Getpid() || time.Since(since) > time.Minute {
		t.Errorf("holder %d %v %v", pid, since, err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l2, err := Try(path)
	if err != nil {
		t.Fatalf("Try after release: %v", err)
	}
	l2.Release()
}

func TestHolderMalformed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "l")
	for _, body := range []string{"", "12", "x 5", "-1 5", "12 0"} {
		os.WriteFile(path, []byte(body), 0o600)
		if _, _, err := Holder(path); err == nil {
			t.Errorf("%q accepted", body)
		}
	}
}
