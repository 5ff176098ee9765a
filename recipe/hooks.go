package recipe

import (
	"math/rand/v2"
	"sync"

	"github.com/google/uuid"
)

// testHooks are settings that tests give a client and users cannot: the
// simulation's, which runs many clients, each in a synctest bubble of its
// own, on parallel workers. A nil *testHooks is production's client.
type testHooks struct {
	// bufferSize, when > 0, sizes go-zookeeper's two buffers (1.5 MiB
	// each by default, zeroed at every connection).
	bufferSize int
	// rand, when set, is the source of the node ids and of the servers'
	// order, so that a schedule's seed decides them.
	rand *lockedRand
}

// lockedRand is a rand.Rand safe for concurrent use.
type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

func newLockedRand(seed uint64) *lockedRand {
	return &lockedRand{r: rand.New(rand.NewPCG(seed, seed^0x6a09e667f3bcc908))}
}

// Read fills p; it never fails.
func (l *lockedRand) Read(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range p {
		p[i] = byte(l.r.Uint32())
	}
	return len(p), nil
}

// newUUID returns a random UUID, from the hooks' source if they have one.
func (c *Client) newUUID() string {
	if c.hooks != nil && c.hooks.rand != nil {
		if u, err := uuid.NewRandomFromReader(c.hooks.rand); err == nil {
			return u.String()
		}
	}
	return uuid.NewString()
}

// shuffle shuffles n elements, from the hooks' source if they have one.
func (c *Client) shuffle(n int, swap func(i, j int)) {
	if c.hooks != nil && c.hooks.rand != nil {
		c.hooks.rand.mu.Lock()
		defer c.hooks.rand.mu.Unlock()
		c.hooks.rand.r.Shuffle(n, swap)
		return
	}
	rand.Shuffle(n, swap)
}
