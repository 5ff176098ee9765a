//go:build unix

package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
)

// The counter file plays a storage service that honours fencing tokens: it
// remembers the greatest token it has seen, on a read or a write, and
// refuses a smaller one, which comes from a holder the mutex has passed
// over (its session expired while it was paused). Each line is "count token
// worker": a write, or, with count -1, a read.

var errFenced = errors.New("fenced: a later holder of the mutex has used the file")

type entry struct {
	count, token int64
	worker       int
}

// read returns the counter; from now on the file refuses tokens below token.
func read(name string, token int64, worker int) (int64, error) {
	return access(name, entry{-1, token, worker})
}

// write sets the counter with token.
func write(name string, e entry) error {
	_, err := access(name, e)
	return err
}

// access appends e and returns the counter, unless the file has seen a
// greater token than e's. It holds flock(2) meanwhile: the check and the
// append are one step for every process.
func access(name string, e entry) (count int64, err error) {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close() // also releases the flock
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return 0, err
	}
	es, err := load(name, true)
	if err != nil {
		return 0, err
	}
	for _, seen := range es {
		if seen.token > e.token {
			return 0, fmt.Errorf("%w (token %#x from worker %d)", errFenced, seen.token, seen.worker)
		}
		if seen.count >= 0 {
			count = seen.count
		}
	}
	_, err = fmt.Fprintf(f, "%d %d %d\n", e.count, e.token, e.worker)
	return count, err
}

// load returns the file's writes, and its reads too if reads is true.
func load(name string, reads bool) ([]entry, error) {
	b, err := os.ReadFile(name)
	var es []entry
	for _, line := range strings.Split(string(b), "\n") {
		var e entry
		if _, err := fmt.Sscan(line, &e.count, &e.token, &e.worker); err == nil && (reads || e.count >= 0) {
			es = append(es, e)
		}
	}
	return es, err
}
