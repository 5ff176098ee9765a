package simzk

import "sync"

// HostProvider is a zk.HostProvider over fixed addresses, which it never
// resolves (nothing in a synctest bubble may use the system's resolver),
// with the rounds of go-zookeeper's own provider: the addresses in the
// order given, and a round's end reported when the list has been tried
// since the last connection.
type HostProvider struct {
	mu                sync.Mutex
	servers           []string
	curr, lastConnect int
}

// Init implements zk.HostProvider.
func (p *HostProvider) Init(servers []string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.servers = append([]string(nil), servers...)
	p.curr, p.lastConnect = -1, -1
	return nil
}

// Len implements zk.HostProvider.
func (p *HostProvider) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.servers)
}

// Next implements zk.HostProvider.
func (p *HostProvider) Next() (server string, retryStart bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.curr = (p.curr + 1) % len(p.servers)
	retryStart = p.curr == p.lastConnect
	if p.lastConnect == -1 {
		p.lastConnect = 0
	}
	return p.servers[p.curr], retryStart
}

// Connected implements zk.HostProvider.
func (p *HostProvider) Connected() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lastConnect = p.curr
}
