package recipe

import "context"

// Children and DeleteNode are the engine's listing and delete.
func Children(ctx context.Context, c *Client, dir string) ([]string, error) {
	return c.children(ctx, dir)
}

func DeleteNode(ctx context.Context, c *Client, path string) error { return c.delete(ctx, path) }

// SplitWrites makes go-zookeeper's frames on c go out in two writes each,
// as a go-zookeeper that wrote its frames in pieces would.
func SplitWrites(c *Client) { c.live.SplitWrites() }

// SharedWatches reports the watches c keeps that waiters left behind, and
// how many waiters joined them in all.
func SharedWatches(c *Client) (paths, subscribers int) {
	c.watches.mu.Lock()
	defer c.watches.mu.Unlock()
	for _, s := range c.watches.shared {
		subscribers += len(s.subs)
	}
	return len(c.watches.shared), subscribers
}
