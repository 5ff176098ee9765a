package analysis

import (
	"sync"
	"time"
)

// Status is the outcome of one operation.
type Status string

// The outcomes.
const (
	// OK: the operation took effect (a write applied, a grant).
	OK Status = "ok"
	// Refused: the operation did not take effect, and the caller knows.
	Refused Status = "refused"
	// Unknown: the caller cannot tell whether it took effect (a reply
	// lost with the connection).
	Unknown Status = "unknown"
)

// Op is one operation of a workload's history.
type Op struct {
	Workload string    `json:"workload"`
	Worker   int       `json:"worker"`
	Kind     string    `json:"kind"` // "inc", "read", "write", "grant", "proclaim"
	Key      int       `json:"key,omitempty"`
	Call     time.Time `json:"call"`
	Return   time.Time `json:"return"`
	Status   Status    `json:"status"`
	// Counter: the value and tag read, and the tag written.
	Old    int64  `json:"old,omitempty"`
	OldTag string `json:"old_tag,omitempty"`
	Tag    string `json:"tag,omitempty"`
	// Token is the fencing token of the hold the operation ran under.
	Token int64  `json:"token,omitempty"`
	Err   string `json:"err,omitempty"`
}

// Interval is one hold as its holder saw it: from the grant until it
// released (the start of its Release call) or was told the hold was lost.
type Interval struct {
	Workload string    `json:"workload"`
	Worker   int       `json:"worker"`
	Key      int       `json:"key,omitempty"` // the counter's key; 0 for other workloads
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
	Lost     bool      `json:"lost"`
	Token    int64     `json:"token"`
	Session  int64     `json:"session"`
}

// History is what the workers of one run recorded. It is safe for
// concurrent use.
type History struct {
	mu        sync.Mutex
	Ops       []Op       `json:"ops"`
	Intervals []Interval `json:"intervals"`
	Faults    []Fault    `json:"faults"`
}

func (h *History) op(o Op) {
	h.mu.Lock()
	h.Ops = append(h.Ops, o)
	h.mu.Unlock()
}

func (h *History) interval(iv Interval) {
	h.mu.Lock()
	h.Intervals = append(h.Intervals, iv)
	h.mu.Unlock()
}

func (h *History) fault(f Fault) {
	h.mu.Lock()
	h.Faults = append(h.Faults, f)
	h.mu.Unlock()
}

// snapshot returns copies of the records.
func (h *History) snapshot() ([]Op, []Interval, []Fault) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Op(nil), h.Ops...), append([]Interval(nil), h.Intervals...), append([]Fault(nil), h.Faults...)
}
