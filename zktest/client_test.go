package zktest_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// logRecorder is a testing.TB that keeps what is logged.
type logRecorder struct {
	testing.TB
	mu   sync.Mutex
	logs []string
}

func (r *logRecorder) Logf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}

func (r *logRecorder) said(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.logs {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// A server that grants no less than 6s (as one ticking every 3s does by
// default): Client says so in the test's log, and says nothing when the
// server grants what was asked.
func TestClientNotesGrantedSessionTimeout(t *testing.T) {
	srv := zktest.Start(t, zktest.WithSessionTimeouts(6*time.Second, 60*time.Second))
	rec := &logRecorder{TB: t}
	c := zktest.Client(rec, srv.Addr(), recipe.WithSessionTimeout(2*time.Second))
	if got := c.SessionTimeout(); got != 6*time.Second {
		t.Fatalf("granted %v, want 6s", got)
	}
	if !rec.said("granted a session timeout of 6s") {
		t.Errorf("no word of the granted timeout in the log: %q", rec.logs)
	}
	rec = &logRecorder{TB: t}
	zktest.Client(rec, srv.Addr(), recipe.WithSessionTimeout(12*time.Second))
	if rec.said("granted") {
		t.Errorf("a timeout granted as asked was reported: %q", rec.logs)
	}
}
