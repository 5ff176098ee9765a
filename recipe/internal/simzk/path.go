package simzk

import (
	"fmt"
	"strings"

	"github.com/go-zookeeper/zk"
)

// checkPath applies the rules go-zookeeper checks on the client before it
// sends a request (an invalid path never reaches the server): absolute, no
// empty, "." or ".." component, no trailing '/' unless a sequence number
// is to be appended, no NUL and none of the control or reserved code
// points ZooKeeper refuses.
func checkPath(path string, sequential bool) error {
	if path == "" || path[0] != '/' {
		return zk.ErrInvalidPath
	}
	if path == "/" {
		return nil
	}
	body := path[1:]
	if sequential && strings.HasSuffix(body, "/") {
		body = body[:len(body)-1]
	} else if strings.HasSuffix(body, "/") {
		return zk.ErrInvalidPath
	}
	if body == "" {
		return zk.ErrInvalidPath // "//"
	}
	for _, part := range strings.Split(body, "/") {
		if part == "" || part == "." || part == ".." {
			return zk.ErrInvalidPath
		}
	}
	// Invalid UTF-8 reads as U+FFFD, which is refused with the specials.
	for _, r := range body {
		switch {
		case r <= 0x1f, r >= 0x7f && r <= 0x9f, r >= 0xf000 && r <= 0xf8ff, r >= 0xfff0 && r < 0xffff:
			return zk.ErrInvalidPath
		}
	}
	return nil
}

// validPath is the server's own check of a final path (after a sequence
// number is appended): the same rules, for requests that bypass the
// client's check (the operations of a multi).
func validPath(path string) bool { return checkPath(path, false) == nil }

// parent returns the path of the parent of path and the child's name.
func parent(path string) (dir, name string) {
	i := strings.LastIndexByte(path, '/')
	if i <= 0 {
		return "/", path[i+1:]
	}
	return path[:i], path[i+1:]
}

// createMode is go-zookeeper's reading of create flags.
type createMode struct {
	ephemeral, sequential, container, ttl bool
}

// parseFlags reads create flags as go-zookeeper does, with its errors.
func parseFlags(flags int32) (createMode, error) {
	switch flags {
	case zk.FlagPersistent:
		return createMode{}, nil
	case zk.FlagEphemeral:
		return createMode{ephemeral: true}, nil
	case zk.FlagSequence:
		return createMode{sequential: true}, nil
	case zk.FlagEphemeralSequential:
		return createMode{ephemeral: true, sequential: true}, nil
	case zk.FlagContainer:
		return createMode{container: true}, nil
	case zk.FlagTTL:
		return createMode{ttl: true}, nil
	case zk.FlagPersistentSequentialWithTTL:
		return createMode{sequential: true, ttl: true}, nil
	}
	return createMode{}, fmt.Errorf("invalid flag value: [%v]", flags)
}
