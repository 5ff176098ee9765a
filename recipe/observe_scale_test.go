package recipe_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/google/uuid"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestObserveLatestAtScale checks Observe's promise, the latest head and
// not every change, with 1,000 observers on four clients while the leader
// changes 10 times, 300 ms apart: every observer's deliveries are heads
// that really led, in order (each token greater than the one before, no
// head twice), and every observer delivers the final leader within 20 s
// of its election. Heads that led for less than an observer's round trip
// may be skipped; how many each observer saw is logged.
func TestObserveLatestAtScale(t *testing.T) {
	const observers, clients, changes = 1000, 4, 10
	srv := zktest.Shared(t)
	raw := zktest.Connect(t, srv.Addr())
	path := openParent(t, raw) // a container: kept by the nodes below
	ctx := locktest.Ctx(t, 120*time.Second)
	// The heads, in order: raw nodes named as the election's.
	var nodes []string
	tokens := map[string]int64{}
	for range changes + 1 {
		p, err := raw.Create(path+"/_c_"+uuid.NewString()+"-"+leader.LockName, nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
		if err != nil {
			t.Fatal(err)
		}
		_, st, err := raw.Get(p)
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, p)
		tokens[p[len(path)+1:]] = st.Czxid
	}
	final := tokens[nodes[changes][len(path)+1:]]

	var (
		mu  sync.Mutex
		got = make([][]recipe.Participant, observers)
		wg  sync.WaitGroup
	)
	var cs []*recipe.Client
	for range clients {
		cs = append(cs, locktest.Client(t, []string{srv.Addr()}))
	}
	for i := range observers {
		e, err := leader.New(cs[i%clients], path)
		if err != nil {
			t.Fatal(err)
		}
		o, err := e.Observer(ctx)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for p := range o.C {
				mu.Lock()
				got[i] = append(got[i], p)
				done := p.Token == final
				mu.Unlock()
				if done {
					return
				}
			}
		})
	}
	first := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, g := range got {
			if len(g) == 0 {
				return false
			}
		}
		return true
	}
	locktest.Eventually(t, 30*time.Second, "every observer's first delivery", first)
	for _, n := range nodes[:changes] {
		time.Sleep(300 * time.Millisecond)
		if err := raw.Delete(n, -1); err != nil {
			t.Fatal(err)
		}
	}
	elected := time.Now()
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(20 * time.Second):
		mu.Lock()
		late := 0
		for _, g := range got {
			if len(g) == 0 || g[len(g)-1].Token != final {
				late++
			}
		}
		mu.Unlock()
		t.Fatalf("%d of %d observers did not deliver the final leader within 20 s", late, observers)
	}
	took := time.Since(elected)

	mu.Lock()
	defer mu.Unlock()
	var counts []int
	for i, g := range got {
		for j, p := range g {
			if tokens[p.Node] != p.Token {
				t.Fatalf("observer %d delivered %s with token %d: not a head of this test", i, p.Node, p.Token)
			}
			if j > 0 && p.Token <= g[j-1].Token {
				t.Fatalf("observer %d delivered token %d after %d", i, p.Token, g[j-1].Token)
			}
		}
		counts = append(counts, len(g))
	}
	slices.Sort(counts)
	t.Logf("%d observers: all delivered the final leader %v after its election; heads delivered of %d: min %d, median %d, max %d",
		observers, took.Round(time.Millisecond), changes+1, counts[0], counts[len(counts)/2], counts[len(counts)-1])
}
