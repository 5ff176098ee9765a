//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package demo

import (
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
