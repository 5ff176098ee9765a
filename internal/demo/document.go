//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package demo

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// Document is a file of [DocumentLines] lines "v<N> token=0x<T> line <i>",
// all of one version N when whole. [Document.Rewrite] writes the next
// version line by line, slowly, and [Document.Read] reads line by line,
// slowly: unless a lock keeps them apart, a reader sees lines of two
// versions, a torn read.
type Document struct{ Path string }

// DocumentLines is the number of lines of a [Document].
const DocumentLines = 5

func documentContent(v, token int64) []byte {
	var b []byte
	for i := range DocumentLines {
		b = fmt.Appendf(b, "v%d token=0x%x line %d\n", v, token, i+1)
	}
	return b
}

// Init writes version 0.
func (d Document) Init() error { return os.WriteFile(d.Path, documentContent(0, 0), 0o644) }

// Read reads the document line by line over about dur and returns its
// lowest version, and whether its lines disagree.
func (d Document) Read(dur time.Duration) (version int64, torn bool, err error) {
	var versions []int64
	for i := range DocumentLines {
		b, err := os.ReadFile(d.Path)
		if err != nil {
			return 0, false, err
		}
		lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		var v int64 = -1
		if i < len(lines) {
			fmt.Sscanf(lines[i], "v%d", &v)
		}
		versions = append(versions, v)
		time.Sleep(dur / DocumentLines)
	}
	slices.Sort(versions)
	return versions[0], versions[0] != versions[len(versions)-1], nil
}

// Rewrite writes the next version with token line by line over about dur,
// and returns it. It stops, leaving the document torn, if stop is closed
// first, and then returns [ErrStopped].
func (d Document) Rewrite(dur time.Duration, token int64, stop <-chan struct{}) (int64, error) {
	v, _, err := d.Read(0)
	if err != nil {
		return 0, err
	}
	next := strings.SplitAfter(string(documentContent(v+1, token)), "\n")
	cur, err := os.ReadFile(d.Path)
	if err != nil {
		return 0, err
	}
	lines := strings.SplitAfter(string(cur), "\n")
	for i := range DocumentLines {
		select {
		case <-stop:
			return 0, ErrStopped
		default:
		}
		if i < len(lines) {
			lines[i] = next[i]
		}
		if err := os.WriteFile(d.Path, []byte(strings.Join(lines, "")), 0o644); err != nil {
			return 0, err
		}
		time.Sleep(dur / DocumentLines)
	}
	return v + 1, nil
}

// Presence counts the readers and writers inside a critical section, in a
// file ("readers=R writers=W") shared by all processes and changed with
// [UpdateFile], so that each sees the true count when it enters.
type Presence struct{ Path string }

// Init empties the count.
func (p Presence) Init() error { return os.WriteFile(p.Path, nil, 0o644) }

func (p Presence) update(writer bool, delta int) (readers, writers int, err error) {
	err = UpdateFile(p.Path, func(b []byte) ([]byte, error) {
		if len(b) > 0 {
			if _, err := fmt.Sscanf(string(b), "readers=%d writers=%d", &readers, &writers); err != nil {
				return nil, fmt.Errorf("%s: bad content %q: %w", p.Path, b, err)
			}
		}
		if writer {
			writers += delta
		} else {
			readers += delta
		}
		return fmt.Appendf(nil, "readers=%d writers=%d\n", readers, writers), nil
	})
	return readers, writers, err
}

// Enter counts a reader or writer in and returns the counts with it.
func (p Presence) Enter(writer bool) (readers, writers int, err error) { return p.update(writer, 1) }

// Exit counts a reader or writer out and returns the counts just before,
// with it.
func (p Presence) Exit(writer bool) (readers, writers int, err error) {
	readers, writers, err = p.update(writer, -1)
	if writer {
		writers++
	} else {
		readers++
	}
	return readers, writers, err
}

// Room is the critical section of the read/write lock demo: the
// [Document] that readers read and writers rewrite, and the [Presence]
// count that tells each visitor who was inside with it.
type Room struct {
	Document Document
	Presence Presence
}

// RoomAt returns the room whose document is at path, with its count next
// to it.
func RoomAt(path string) Room {
	return Room{Document: Document{Path: path}, Presence: Presence{Path: path + ".inside"}}
}

// Init writes version 0 of the document and empties the count.
func (r Room) Init() error {
	return errors.Join(r.Document.Init(), r.Presence.Init())
}

// RWReport is what a reader or writer of the read/write lock demo tells
// its parent when it ends.
type RWReport struct {
	Done       int   // reads or writes completed
	Waits      Waits // one per hold
	MaxReaders int   // most readers inside at once, seen by this process
	Violations int   // times a writer was not alone, or a reader met a writer
	Torn       int   // reads that found a half-written document
	Lost       int   // holds lost before the turn was done
}

// Visit takes one turn in the room; call it holding the lock, with lost
// its Done channel. A writer rewrites the document with token over about
// d; a reader reads it over about d. Visit returns what the visitor did
// and who was inside with it, and records the turn in rep. If lost is
// closed by the end of the turn, it returns [ErrStopped] (counted in
// rep.Lost): the turn must be taken again.
func (r Room) Visit(writer bool, d time.Duration, token int64, lost <-chan struct{}, rep *RWReport) (what, who string, err error) {
	readers, writers, err := r.Presence.Enter(writer)
	if err != nil {
		return "", "", err
	}
	var version int64
	torn := false
	if writer {
		version, err = r.Document.Rewrite(d, token, lost)
		what = fmt.Sprintf("wrote v%d  token=0x%x", version, token)
	} else {
		version, torn, err = r.Document.Read(d)
		what = fmt.Sprintf("read  v%d", version)
	}
	// The counts when this process left, itself included: with those at
	// its entry, they show who shared the lock with it.
	r2, w2, perr := r.Presence.Exit(writer)
	if perr != nil {
		return "", "", perr
	}
	readers, writers = max(readers, r2), max(writers, w2)
	rep.MaxReaders = max(rep.MaxReaders, readers)
	who = fmt.Sprintf("(%d %s inside)", readers, Plural(readers, "reader"))
	if writer {
		who = "(alone)"
	}
	if writer && (readers > 0 || writers > 1) || !writer && writers > 0 {
		rep.Violations++
		who = fmt.Sprintf("VIOLATION: %d readers and %d writers inside", readers, writers)
	}
	switch {
	case errors.Is(err, ErrStopped) || err == nil && Closed(lost):
		rep.Lost++
		return what, who, ErrStopped
	case err != nil:
		return what, who, err
	}
	rep.Done++
	if torn {
		rep.Torn++
		who += "  TORN: the file was half-written"
	}
	return what, who, nil
}

// SummarizeRW prints the summary of a read/write lock demo that took
// took: a line per reader and writer (from its [RWReport] and exit
// status). It returns 0 if no writer shared the lock, no read was torn and
// every process succeeded.
func SummarizeRW(children []*Child, took time.Duration) int {
	fmt.Printf("\nsummary (%s)\n", Ms(took))
	ok := true
	maxReaders, violations, torn := 0, 0, 0
	for _, c := range children {
		var r RWReport
		code := c.Wait()
		if !c.Report(&r) {
			fmt.Printf("  %s  no report (exit status %d)\n", c.Name(), code)
			ok = false
			continue
		}
		maxReaders = max(maxReaders, r.MaxReaders)
		violations += r.Violations
		torn += r.Torn
		what := "reads "
		if c.Role == "writer" {
			what = "writes"
		}
		line := fmt.Sprintf("  %s  %2d %s  %s", c.Name(), r.Done, what, r.Waits)
		if r.Lost > 0 {
			line += fmt.Sprintf("  lost %d", r.Lost)
		}
		if code != 0 {
			line += fmt.Sprintf("  FAILED (exit status %d)", code)
			ok = false
		}
		fmt.Println(line)
	}
	fmt.Printf("  most readers inside at once: %d\n", maxReaders)
	switch {
	case violations > 0:
		fmt.Printf("FAIL: %d times a writer shared the lock\n", violations)
	case torn > 0:
		fmt.Printf("FAIL: %d reads found a half-written file\n", torn)
	case !ok:
		fmt.Println("FAIL: a process failed (see above)")
	default:
		fmt.Println("ok: readers shared the lock, every writer was alone, no read saw a half-written file")
		return 0
	}
	return 1
}
