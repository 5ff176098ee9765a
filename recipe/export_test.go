package recipe

import (
	"context"
	"errors"
	"runtime/debug"
)

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

// DirectCreate creates an ephemeral sequential node at path holding data
// with a direct request, with the listing of dir (and its data, with
// readDir) written behind it; ok is false when the connection took no
// direct request.
func DirectCreate(ctx context.Context, c *Client, path, dir string, data []byte, readDir bool) (node string, zxid int64, names []string, dirData []byte, ok bool, err error) {
	res, ok, err := c.directCreate(ctx, createRequest{paths: []string{path}, data: data, dir: dir, behind: true, readDir: readDir})
	if !ok || err != nil {
		return "", 0, nil, nil, ok, err
	}
	if res.read == nil {
		return "", 0, nil, nil, true, errors.New("no reads behind the create")
	}
	if res.read.errL != nil {
		return "", 0, nil, nil, true, res.read.errL
	}
	return res.nodes[0], res.zxids[0], res.read.names, res.read.dirData, true, res.read.errD
}

// SplitWrites makes go-zookeeper's frames on c go out in two writes each,
// as a go-zookeeper that broke that assumption would write them.
func SplitWrites(c *Client) { c.splitWrites.Store(true) }

// UnknownReplyFormat is go-zookeeper's log line that the client's logger
// filters for direct replies.
const UnknownReplyFormat = unknownReplyFormat

// SetBuildInfo replaces the build information the client reads at Connect
// until the test ends.
func SetBuildInfo(t interface{ Cleanup(func()) }, info *debug.BuildInfo) {
	old := readBuildInfo
	readBuildInfo = func() (*debug.BuildInfo, bool) { return info, info != nil }
	t.Cleanup(func() { readBuildInfo = old })
}
