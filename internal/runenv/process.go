package runenv

import (
	"io"
	"os"
	"time"
)

// Process is what a program gets from its process: main passes the real
// one (OS), tests fakes.
type Process struct {
	Args     []string
	Getenv   func(string) string
	Hostname func() (string, error)
	Stdout   io.Writer
	Stderr   io.Writer
	// Exit ends the process from the watchdog when a run overstays.
	Exit func(int)
	// Now is the clock for the policy, events, heartbeats and metrics;
	// time.Now when nil (see Clock).
	Now func() time.Time
}

// OS is the running process.
func OS() Process {
	return Process{
		Args:     os.Args[1:],
		Getenv:   os.Getenv,
		Hostname: os.Hostname,
		Stdout:   os.Stdout,
		Stderr:   os.Stderr,
		Exit:     os.Exit,
		Now:      time.Now,
	}
}

// Clock is the time now, by Now.
func (p Process) Clock() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}
