package leader_test

import (
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/leader"
	"github.com/zkrecipes/zkrecipes/recipe"
	"github.com/zkrecipes/zkrecipes/zktest"
)

// When the old leader hears of its loss, measured from the moment the
// next participant leads, for the two kinds of fault (docs/leader.md,
// "When the leader is told"):
//
//   - network silence (a partition): the old leader is told before the
//     next one leads, since its client suspends before the server can
//     expire the session;
//   - the server ending the session itself (Proxy.ExpireSessions): the
//     old leader hears it about when the next one leads, either side of
//     it, and a Commit of its term never lands meanwhile.
//
// LEADER_NOTICE_ROUNDS sets the rounds of the expiry case (default 3).
func TestLossNoticeAgainstNextLeader(t *testing.T) {
	srv := zktest.Shared(t)
	raw := zktest.Connect(t, srv.Addr())
	rounds := 3
	if s := os.Getenv("LEADER_NOTICE_ROUNDS"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 && n <= 100 {
			rounds = n
		}
	}

	// term sets up a leader behind a proxy and a standby in line behind it,
	// and returns them with the standby's campaign.
	term := func(t *testing.T) (*leader.Election, *zktest.Proxy, <-chan time.Time) {
		path := zktest.UniquePath(t)
		ctx := locktest.Ctx(t, 60*time.Second)
		proxy := srv.Proxy(t)
		old := newElection(t, locktest.Client(t, []string{proxy.Addr()}), path)
		standby := newElection(t, locktest.Client(t, []string{srv.Addr()}), path)
		if err := old.Campaign(ctx); err != nil {
			t.Fatal(err)
		}
		old.Done() // arms the hold's own watch now
		led := make(chan time.Time, 1)
		go func() {
			if err := standby.Campaign(ctx); err != nil {
				t.Error(err)
				close(led)
				return
			}
			led <- time.Now()
		}()
		locktest.Queued(t, 2, old.Participants)
		return old, proxy, led
	}

	t.Run("partition", func(t *testing.T) {
		old, proxy, led := term(t)
		proxy.Partition()
		<-old.Done()
		told := time.Now()
		if err := old.Err(); !errors.Is(err, recipe.ErrConnectionSuspended) {
			t.Fatalf("Err after the partition = %v, want ErrConnectionSuspended", err)
		}
		at, ok := <-led
		if !ok {
			t.FailNow()
		}
		t.Logf("partition: the old leader was told %v before the next one led", at.Sub(told))
		if !told.Before(at) {
			t.Fatalf("the next leader led %v before the old one was told", told.Sub(at))
		}
		proxy.Heal()
	})

	t.Run("server-side expiry", func(t *testing.T) {
		var worst time.Duration
		for r := range rounds {
			old, proxy, led := term(t)
			told := make(chan time.Time, 1)
			go func() { <-old.Done(); told <- time.Now() }()
			if n, err := proxy.ExpireSessions(); err != nil || n != 1 {
				t.Fatalf("ExpireSessions = %d, %v", n, err)
			}
			at, ok := <-led
			if !ok {
				t.FailNow()
			}
			// The next leader leads: whatever the old one believes, its
			// term's writes are refused. Sent before the old leader heard
			// of the expiry, the Commit may meet the connection the server
			// closed (its outcome unknown to the client), but never lands.
			ctx := locktest.Ctx(t, 10*time.Second)
			late := old.Path() + "-late"
			if _, err := old.Commit(ctx, recipe.Create(late, nil)); !errors.Is(err, leader.ErrLost) && !errors.Is(err, recipe.ErrCommitUnknown) {
				t.Fatalf("round %d: the old leader's Commit after the next one led = %v, want ErrLost or ErrCommitUnknown", r, err)
			}
			if ok, _, err := raw.Exists(late); err != nil || ok {
				t.Fatalf("round %d: the old leader's write landed after the next one led (exists %v, %v)", r, ok, err)
			}
			var heard time.Time
			select {
			case heard = <-told:
			case <-time.After(10 * time.Second):
				t.Fatalf("round %d: the old leader was not told within 10s of the next one leading", r)
			}
			if err := old.Err(); !errors.Is(err, recipe.ErrSessionExpired) {
				t.Fatalf("round %d: Err = %v, want ErrSessionExpired", r, err)
			}
			gap := heard.Sub(at) // negative: told first
			worst = max(worst, gap)
			t.Logf("server-side expiry, round %d: the old leader was told %v after the next one led", r, gap)
		}
		t.Logf("server-side expiry: at most %v over %d rounds", worst, rounds)
	})
}
