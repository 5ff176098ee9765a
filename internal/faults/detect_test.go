package faults_test

import (
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// How soon a holder learns of its loss when the connection goes silent:
// a partition (the proxy black-holes both ways) or a frozen server
// (SIGSTOP). With a 2 s session the loss timeout is 1 s after the last
// reply; the holder must be told then, before the session can expire, whether or not
// anybody asked the hold for its loss signal before the fault (a hold
// nobody asks about has no monitor: its epoch's end records the loss).
func TestLossDetection(t *testing.T) {
	const session = 2 * time.Second
	srv := zktest.Start(t)
	for _, fault := range []string{"partition", "server frozen"} {
		for _, asked := range []bool{true, false} {
			name := fault + "/not asked"
			if asked {
				name = fault + "/Done asked"
			}
			t.Run(name, func(t *testing.T) {
				p, err := zktest.NewProxy(srv.Addr())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { p.Close() })
				c := p.Client(t, recipe.WithSessionTimeout(session))
				m, err := mutex.New(c, zktest.UniquePath(t))
				if err != nil {
					t.Fatal(err)
				}
				ctx := locktest.Ctx(t, 10*time.Second)
				if err := m.Lock(ctx); err != nil {
					t.Fatal(err)
				}
				var done <-chan struct{}
				if asked {
					done = m.Done()
				}
				time.Sleep(300 * time.Millisecond) // a ping or two go through first
				start := time.Now()
				switch fault {
				case "partition":
					p.Partition()
					defer p.Heal()
				default:
					if err := srv.Freeze(); err != nil {
						t.Fatal(err)
					}
					defer srv.Thaw()
				}
				lost := func() bool {
					if asked {
						select {
						case <-done:
							return true
						default:
							return false
						}
					}
					return c.Stats().Lost > 0
				}
				for !lost() {
					if time.Since(start) > session {
						t.Fatalf("not told of the loss within the session timeout (%v)", session)
					}
					time.Sleep(time.Millisecond)
				}
				took := time.Since(start)
				// The silence began with the last reply before the fault, so
				// this is at most the loss timeout.
				t.Logf("told of the loss %v after the fault began (loss timeout %v)", took.Round(time.Millisecond), session/2)
			})
		}
	}
}
