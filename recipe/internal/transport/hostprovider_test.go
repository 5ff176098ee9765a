package transport

import (
	"sync"
	"testing"
	"time"
)

// The host provider's pacer is used by one Next at a time, whichever
// goroutines call Next and answered (the race detector checks it), and a
// server's answer starts the next round at once.
func TestHostProviderConcurrentAnswers(t *testing.T) {
	c := New(Config{SessionTimeout: 2 * time.Second}, &countUp{})
	defer c.Close()
	h := &hostProvider{t: c}
	if err := h.Init([]string{"127.0.0.1:1", "127.0.0.1:2"}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				h.answered()
				time.Sleep(time.Millisecond)
			}
		}
	})
	for range 2 {
		wg.Go(func() {
			for range 20 {
				h.Next()
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()

	// After an answer, a whole round goes out with no pause.
	h.answered()
	start := time.Now()
	for range 2 {
		h.Next()
	}
	if d := time.Since(start); d > 50*time.Millisecond {
		t.Fatalf("a round after an answer took %v", d)
	}
}
