package recipe

// CommitSize is the length of the frame Commit would send for ops behind
// the check of the hold's node at own; AcquireNSize the one of the
// transaction that enqueues n nodes of l.
func CommitSize(c *Client, own string, ops ...Op) int {
	bodies := []int{Check(own, AnyVersion).encodedLen(nil)}
	for _, o := range ops {
		bodies = append(bodies, o.encodedLen(c.cfg.acl))
	}
	return multiLen(bodies...)
}

func AcquireNSize(l *Lock, n int) int { return l.nSize(n) }

// MaxPacket is the client's limit on a request's frame.
func MaxPacket(c *Client) int { return c.cfg.maxPacket }
