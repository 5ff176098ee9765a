//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"
)

// Pause stops the child (SIGSTOP) for d, or until ctx ends, as a long
// garbage-collection pause or a suspended virtual machine would, then lets
// it go on (SIGCONT).
func (c *Child) Pause(ctx context.Context, d time.Duration) error {
	if err := c.Signal(syscall.SIGSTOP); err != nil {
		return fmt.Errorf("stop %s: %w", c.Name(), err)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	if err := c.Signal(syscall.SIGCONT); err != nil {
		return fmt.Errorf("resume %s: %w", c.Name(), err)
	}
	return ctx.Err()
}

// ReadFile returns the content of the file at path, read under a shared
// flock(2), so that it never sees half of an [UpdateFile].
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close() // also releases the file lock
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
		return nil, fmt.Errorf("flock %s: %w", path, err)
	}
	return io.ReadAll(f)
}

// UpdateFile replaces the content of the file at path (created if missing)
// with what update returns for its current content, under an exclusive
// flock(2): the processes that update one file this way do so one at a
// time, each seeing the last one's change. If update fails, the file is
// left as it was and its error returned.
func UpdateFile(path string, update func(old []byte) ([]byte, error)) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close() // also releases the file lock
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("flock %s: %w", path, err)
	}
	old, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	b, err := update(old)
	if err != nil {
		return err
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err = f.WriteAt(b, 0)
	return err
}
