package faults

import (
	"testing"
	"time"
)

func TestClipExpired(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// Worker 0's session 7 was expired between +100ms and +110ms.
	exp := map[int][]expiry{0: {{from: at(100), to: at(110), session: 7}}}
	tests := []struct {
		name    string
		iv      Interval
		keep    bool
		wantEnd time.Time
	}{
		{"before the expiry", Interval{Worker: 0, Start: at(0), End: at(90), Session: 7}, true, at(90)},
		{"spanning it", Interval{Worker: 0, Start: at(50), End: at(200), Session: 7}, true, at(100)},
		{"granted while it ran", Interval{Worker: 0, Start: at(105), End: at(200), Session: 7}, false, time.Time{}},
		{"granted after it on the expired session", Interval{Worker: 0, Start: at(120), End: at(130), Session: 7}, false, time.Time{}},
		{"granted after it on a new session", Interval{Worker: 0, Start: at(120), End: at(130), Session: 8}, true, at(130)},
		{"session unknown, after it", Interval{Worker: 0, Start: at(120), End: at(130)}, true, at(130)},
		{"another worker", Interval{Worker: 1, Start: at(50), End: at(200), Session: 7}, true, at(200)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := clipExpired([]Interval{tt.iv}, exp)
			if !tt.keep {
				if len(got) != 0 {
					t.Fatalf("kept %+v", got)
				}
				return
			}
			if len(got) != 1 || !got[0].End.Equal(tt.wantEnd) {
				t.Fatalf("got %+v, want one interval ending at %v", got, tt.wantEnd)
			}
		})
	}
}

// A worker granted after a ghost's grant is a violation only if the
// watcher found the ghost's node there after the worker's grant; one
// granted after that, before the watcher saw the node gone, learnt of
// the deletion first.
func TestGhostViolations(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	end := ghostEnd{present: at(500), gone: at(700)}
	for _, tc := range []struct {
		name  string
		start int
		want  int
	}{
		{"before the ghost's grant", -10, 0},
		{"while the node was seen there", 300, 1},
		{"after the last sight, before the watcher saw it gone", 550, 0},
		{"after it was gone", 800, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ghostViolations(at(0), end, []Interval{{Worker: 1, Start: at(tc.start), End: at(tc.start + 50)}})
			if len(got) != tc.want {
				t.Errorf("%d violations %q, want %d", len(got), got, tc.want)
			}
		})
	}
}
