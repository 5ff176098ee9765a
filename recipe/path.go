package recipe

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// ValidatePath reports whether p can name a lock directory: an absolute
// ZooKeeper path, not the root, with no empty, "." or ".." segments, no
// trailing slash, no characters ZooKeeper rejects, and not under the
// reserved /zookeeper tree. The error wraps [ErrInvalidPath].
func ValidatePath(p string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w %q: %s", ErrInvalidPath, p, why)
	}
	switch {
	case p == "":
		return bad("empty")
	case p[0] != '/':
		return bad("must be absolute (start with /)")
	case p == "/":
		return bad("the root cannot be a lock directory")
	case strings.HasSuffix(p, "/"):
		return bad("trailing slash")
	case !utf8.ValidString(p):
		return bad("not valid UTF-8")
	}
	for _, seg := range strings.Split(p[1:], "/") {
		switch seg {
		case "":
			return bad("empty segment (//)")
		case ".", "..":
			return bad("relative segment " + seg)
		}
	}
	if p == "/zookeeper" || strings.HasPrefix(p, "/zookeeper/") {
		return bad("the /zookeeper tree is reserved by the server")
	}
	for _, r := range p {
		// The characters ZooKeeper's PathUtils refuses.
		if r == 0 || (r > 0 && r < 0x20) || (r >= 0x7f && r <= 0x9f) ||
			(r >= 0xd800 && r <= 0xf8ff) || (r >= 0xfff0 && r <= 0xffff) {
			return bad(fmt.Sprintf("character %U not allowed", r))
		}
	}
	return nil
}

// join returns dir/name.
func join(dir, name string) string { return dir + "/" + name }

// parentOf returns the parent of an absolute path ("" for a top-level node).
func parentOf(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return ""
	}
	return p[:i]
}

// baseOf returns the last segment of p.
func baseOf(p string) string { return p[strings.LastIndexByte(p, '/')+1:] }
