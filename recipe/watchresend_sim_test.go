package recipe

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zkrecipes/zkrecipes/recipe/internal/simzk"
)

var watchSimRounds = flag.Int("sim.watchrounds", 300, "outages TestSimWatchResent makes (30 under -short)")

// A child watch across a reconnect, in the simulation, where requests
// queued during the outage are answered the instant the client is back
// (no link delay): the real client (go-zookeeper, the wire tap) has a
// child watch, is cut off, the directory changes and the connection is
// reset (the notification is lost in flight), requests are queued, the
// client reconnects. go-zookeeper sends the watch again with the last
// zxid it has read; the server must fire it. A queued request's reply
// read before go-zookeeper reads that zxid for setWatches would move it
// past the change, and the watch would never fire.
func TestSimWatchResent(t *testing.T) {
	skipUnpatchedRace(t)
	rounds := *watchSimRounds
	if testing.Short() {
		rounds = 30
	}
	var mu sync.Mutex
	var missed []string
	for seed := range uint64(rounds) {
		synctest.Test(t, func(t *testing.T) {
			w := simzk.New(seed)
			defer w.Close()
			if err := w.CreateNode("/d", nil); err != nil {
				t.Fatal(err)
			}
			h := w.NewHost("a")
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c, err := connect(ctx, simServers[:1], &testHooks{bufferSize: simBufferSize, rand: newLockedRand(seed)},
				[]Option{WithDialer(h.Dial), WithSessionTimeout(10 * time.Second)})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_, _, ch, err := c.Conn().ChildrenW("/d")
			if err != nil {
				t.Fatal(err)
			}
			h.Partition(200*time.Millisecond, true, true)
			if err := w.CreateNode(fmt.Sprintf("/d/n%d", seed), nil); err != nil {
				t.Fatal(err)
			}
			h.Drop()
			time.Sleep(time.Millisecond)
			var wg sync.WaitGroup
			defer wg.Wait()
			for range 1 + int(seed%8) {
				wg.Go(func() { c.Conn().Get("/d") })
			}
			select {
			case <-ch:
			case <-time.After(5 * time.Second):
				mu.Lock()
				missed = append(missed, fmt.Sprintf("seed %d (zxid %#x)", seed, w.Zxid()))
				mu.Unlock()
			}
		})
	}
	t.Logf("%d outages, %d child watches that did not fire after the reconnect", rounds, len(missed))
	if len(missed) > 0 {
		t.Errorf("child watches lost across a reconnect: %v", missed)
	}
}
