package main

// `yard-peer-go fib N --workers W [--cutoff C] [--repeat K] [--json]`: the Eve
// study's Program 1, parallel Fibonacci, written the way a Go programmer
// would: each call above the cutoff starts one goroutine per child, each
// child writes its result into its own slot in the parent's frame, and the
// parent waits on a sync.WaitGroup. GOMAXPROCS = W. It prints the JSON of
// yard-tasks (tools/tasks) with "runtime":"go", so the harness can put the
// two side by side (issue 22, docs/peers.md).

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"time"
)

const (
	fibMaxN          = 92 // fib(92) is the largest that fits in an int64
	fibDefaultCutoff = 20
	fibDefaultRepeat = 5
)

// fibSeq is the sequential fib below the cutoff: plain recursion, as in the study.
func fibSeq(n int) int64 {
	if n < 2 {
		return int64(n)
	}
	return fibSeq(n-1) + fibSeq(n-2)
}

// fibPar is Program 1: two goroutines per call above the cutoff, joined.
func fibPar(n, cutoff int) int64 {
	if n < 2 {
		return int64(n)
	}
	if n <= cutoff {
		return fibSeq(n)
	}
	var x, y int64
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { x = fibPar(n-1, cutoff); wg.Done() }()
	go func() { y = fibPar(n-2, cutoff); wg.Done() }()
	wg.Wait()
	return x + y
}

// fibExact is the reference value, computed iteratively.
func fibExact(n int) int64 {
	var a, b int64 = 0, 1
	for i := 0; i < n; i++ {
		a, b = b, a+b
	}
	return a
}

// fibTasks is the number of goroutines one run of fibPar(n, cutoff) starts:
// two for every call with n >= 2 and n > cutoff. The call tree is fixed, so
// this is exact without counting at run time (which would cost an atomic per
// task).
func fibTasks(n, cutoff int) int64 {
	memo := make(map[int]int64)
	var count func(int) int64
	count = func(n int) int64 {
		if n < 2 || n <= cutoff {
			return 0
		}
		if v, ok := memo[n]; ok {
			return v
		}
		v := 2 + count(n-1) + count(n-2)
		memo[n] = v
		return v
	}
	return count(n)
}

// fibReport has the keys of yard-tasks' JSON, in its order.
type fibReport struct {
	Tool            string    `json:"tool"`
	Program         string    `json:"program"`
	N               int       `json:"n"`
	Runtime         string    `json:"runtime"`
	Workers         int       `json:"workers"`
	Cutoff          int       `json:"cutoff"`
	Repeat          int       `json:"repeat"`
	Result          int64     `json:"result"`
	Expected        int64     `json:"expected"`
	Correct         bool      `json:"correct"`
	TimesS          []float64 `json:"times_s"`
	MinS            float64   `json:"min_s"`
	MedianS         float64   `json:"median_s"`
	WallS           []float64 `json:"wall_s"`
	Tasks           int64     `json:"tasks"`
	Steals          *int64    `json:"steals"`
	NsPerTask       *float64  `json:"ns_per_task"`
	InlineFallbacks int       `json:"inline_fallbacks"`
	CPUs            int       `json:"cpus"`
}

func fibUsage(w io.Writer) {
	fmt.Fprintf(w, `usage: yard-peer-go fib N --workers W [--cutoff C] [--repeat K] [--json]

The Eve study's Program 1 with goroutines and a sync.WaitGroup: fib(n) starts a
goroutine for fib(n-1) and one for fib(n-2) and waits for both, down to the
cutoff, below which it recurses sequentially.

  N               0..%d
  --workers W     GOMAXPROCS, >= 1 (default: the CPUs this process may use, %d)
  --cutoff C      n <= C is computed sequentially; 0 = a goroutine pair for every
                  call with n >= 2 (default %d)
  --repeat K      repetitions in this process, each timed (default %d)
  --json          one JSON object, the schema of yard-tasks (see docs/peers.md)

Exit status: 0 ok, 1 a wrong result, 2 a usage error.
`, fibMaxN, runtime.NumCPU(), fibDefaultCutoff, fibDefaultRepeat)
}

// fibArgs parses the arguments after "fib"; flags may come before or after N.
func fibArgs(args []string) (n, workers, cutoff, repeat int, asJSON bool) {
	fs := flag.NewFlagSet("yard-peer-go fib", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.IntVar(&workers, "workers", runtime.NumCPU(), "")
	fs.IntVar(&cutoff, "cutoff", fibDefaultCutoff, "")
	fs.IntVar(&repeat, "repeat", fibDefaultRepeat, "")
	fs.BoolVar(&asJSON, "json", false, "")
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fibUsage(os.Stdout)
				os.Exit(0)
			}
			die(2, "fib: %v (see fib --help)", err)
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(pos) != 1 {
		die(2, "fib: expected one argument N (0..%d), got %d; see fib --help", fibMaxN, len(pos))
	}
	v, err := strconv.Atoi(pos[0])
	if err != nil || v < 0 || v > fibMaxN {
		die(2, "fib: N %q: expected an integer 0..%d", pos[0], fibMaxN)
	}
	if workers < 1 {
		die(2, "fib: --workers %d: expected >= 1", workers)
	}
	if cutoff < 0 {
		die(2, "fib: --cutoff %d: expected >= 0", cutoff)
	}
	if repeat < 1 {
		die(2, "fib: --repeat %d: expected >= 1", repeat)
	}
	return v, workers, cutoff, repeat, asJSON
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// runFib is `yard-peer-go fib ...`; it returns the exit status.
func runFib(args []string) int {
	n, workers, cutoff, repeat, asJSON := fibArgs(args)
	expected := fibExact(n)
	r := fibReport{Tool: "yard-tasks", Program: "fib", N: n, Runtime: "go", Workers: workers,
		Cutoff: cutoff, Repeat: repeat, Expected: expected, Correct: true,
		Tasks: fibTasks(n, cutoff), CPUs: runtime.NumCPU()}
	for i := 0; i < repeat; i++ {
		// Go starts its scheduler before main; what a repetition can start is
		// GOMAXPROCS itself (a stop-the-world resize the first time). wall_s
		// includes it, times_s is fibPar alone.
		w0 := time.Now()
		runtime.GOMAXPROCS(workers)
		t0 := time.Now()
		got := fibPar(n, cutoff)
		t1 := time.Now()
		r.TimesS = append(r.TimesS, t1.Sub(t0).Seconds())
		r.WallS = append(r.WallS, t1.Sub(w0).Seconds())
		r.Result = got
		if got != expected {
			r.Correct = false
		}
	}
	r.MinS = r.TimesS[0]
	for _, t := range r.TimesS {
		if t < r.MinS {
			r.MinS = t
		}
	}
	r.MedianS = median(r.TimesS)
	if r.Tasks > 0 {
		ns := r.MedianS * 1e9 / float64(r.Tasks)
		r.NsPerTask = &ns
	}
	if asJSON {
		b, err := json.Marshal(r)
		if err != nil {
			die(1, "fib: %v", err)
		}
		fmt.Println(string(b))
	} else {
		fmt.Printf("fib(%d) = %d (expected %d) runtime go, %d workers, cutoff %d\n",
			n, r.Result, expected, workers, cutoff)
		fmt.Printf("min %.6f s, median %.6f s over %d repetitions; %d goroutines", r.MinS,
			r.MedianS, repeat, r.Tasks)
		if r.NsPerTask != nil {
			fmt.Printf(", %.1f ns per goroutine (median)", *r.NsPerTask)
		}
		fmt.Println()
	}
	if !r.Correct {
		fmt.Fprintf(os.Stderr, "yard-peer-go: fib(%d): got %d, expected %d\n", n, r.Result, expected)
		return 1
	}
	return 0
}
