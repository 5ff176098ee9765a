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
