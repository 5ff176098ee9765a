package recipe

import "context"

// DirectChildren and DirectDelete make direct requests (direct.go) for the
// tests of package recipe_test, which run them against real ZooKeeper.
func DirectChildren(ctx context.Context, c *Client, dir string) ([]string, bool, error) {
	return c.directChildren(ctx, dir)
}

func DirectDelete(ctx context.Context, c *Client, path string) (bool, error) {
	return c.directDelete(ctx, path)
}

// Children and DeleteNode are the engine's listing and delete: direct where
// the connection takes it, through go-zookeeper otherwise.
func Children(ctx context.Context, c *Client, dir string) ([]string, error) {
	return c.children(ctx, dir)
}

func DeleteNode(ctx context.Context, c *Client, path string) error { return c.delete(ctx, path) }
