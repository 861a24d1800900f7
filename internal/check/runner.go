package check

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// Task is a check with its own time limit.
type Task struct {
	Check   Check
	Timeout time.Duration
}

// Timed is a check's results with how long the check took.
type Timed struct {
	Name     string
	Results  []Result
	Duration time.Duration
}

// Run runs every task concurrently. Each task gets its own timeout, capped
// by ctx (the global deadline). A task that has not returned by then is
// abandoned and reported as ERROR "timed out after Ns": a hung NVML or NFS
// call must not keep the process past slurmd's 60 s kill. Results come back
// in the order of tasks.
func Run(ctx context.Context, tasks []Task) []Timed {
	return Stream(ctx, tasks, nil)
}

// Stream is Run that also hands each task's results to done as soon as
// that task finishes, so a FAIL found in a millisecond can be acted on
// while a slow check still runs. done is called from one goroutine, one
// task at a time, with the task's index; nil means no callback. Stream
// returns when every task has returned or timed out, as Run does.
func Stream(ctx context.Context, tasks []Task, done func(i int, t Timed)) []Timed {
	out := make([]Timed, len(tasks))
	finished := make(chan int, len(tasks))
	for i, t := range tasks {
		go func() {
			out[i] = runOne(ctx, t)
			finished <- i
		}()
	}
	for range tasks {
		i := <-finished
		if done != nil {
			done(i, out[i])
		}
	}
	return out
}

func runOne(parent context.Context, t Task) Timed {
	name := safeName(t.Check)
	start := time.Now()
	ctx, cancel := context.WithTimeout(parent, t.Timeout)
	defer cancel()

	// Buffered so an abandoned check can still send and its goroutine exit.
	ch := make(chan []Result, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				ch <- []Result{{Component: "host", Status: Error, Action: ActionNone,
					Message: fmt.Sprintf("check panicked: %v", p)}}
			}
		}()
		ch <- t.Check.Run(ctx)
	}()

	var results []Result
	select {
	case results = <-ch:
	case <-ctx.Done():
		results = []Result{timeoutResult(start)}
	}
	for i := range results {
		results[i].Check = name
		if results[i].Action == "" {
			results[i].Action = ActionNone
		}
	}
	return Timed{Name: name, Results: results, Duration: time.Since(start)}
}

// safeName keeps a panicking Name from taking the whole run down.
func safeName(c Check) (name string) {
	defer func() {
		if recover() != nil {
			name = fmt.Sprintf("%T", c)
		}
	}()
	return c.Name()
}

func timeoutResult(start time.Time) Result {
	secs := time.Since(start).Round(100 * time.Millisecond).Seconds()
	return Result{Component: "host", Status: Error, Action: ActionNone,
		Message: fmt.Sprintf("timed out after %gs", secs)}
}

// Flatten returns all results, ordered by check then component, so output
// and reasons are stable from run to run.
func Flatten(timed []Timed) []Result {
	var all []Result
	for _, t := range timed {
		all = append(all, t.Results...)
	}
	sort.SliceStable(all, func(i, j int) bool {
		if all[i].Check != all[j].Check {
			return all[i].Check < all[j].Check
		}
		return all[i].Component < all[j].Component
	})
	return all
}

// FinishEarly ends a little before ctx's deadline, so that a check whose
// device or filesystem does not answer can report that by name ("NVML did
// not answer in 9s") before the runner gives up on it with a generic
// "timed out".
func FinishEarly(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	margin := min(max(time.Until(dl)/10, 20*time.Millisecond), time.Second)
	return context.WithDeadline(ctx, dl.Add(-margin))
}

// NameOf is c's name, or its type if Name panics.
func NameOf(c Check) string { return safeName(c) }
