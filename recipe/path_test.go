package recipe

import (
	"errors"
	"strings"
	"testing"
)

func TestValidatePath(t *testing.T) {
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{"/a", true},
		{"/locks/orders", true},
		{"/locks/orders-2024_x.y", true},
		{"/ünicode/ok", true},
		{"", false},
		{"a", false},
		{"locks/a", false},
		{"/", false},
		{"/a/", false},
		{"/a//b", false},
		{"//a", false},
		{"/a/./b", false},
		{"/a/../b", false},
		{"/.", false},
		{"/..", false},
		{"/zookeeper", false},
		{"/zookeeper/quota", false},
		{"/zookeeperish", true},
		{"/a\x00b", false},
		{"/a\tb", false},
		{"/a\u0085b", false},
		{"/a\ufff5b", false},
		{"/a\xffb", false},
	} {
		err := ValidatePath(tc.path)
		if (err == nil) != tc.ok {
			t.Errorf("ValidatePath(%q) = %v, want ok=%v", tc.path, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidPath) {
			t.Errorf("ValidatePath(%q) error %v does not wrap ErrInvalidPath", tc.path, err)
		}
	}
}

func FuzzValidatePath(f *testing.F) {
	for _, s := range []string{"/a", "/a/b", "", "/", "//", "/a/../b", "/zookeeper", "/a\x00", "/\ud7ff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		err := ValidatePath(p)
		if err != nil {
			if !errors.Is(err, ErrInvalidPath) {
				t.Fatalf("error %v does not wrap ErrInvalidPath", err)
			}
			return
		}
		// Whatever is accepted is absolute, clean, and splits into
		// non-empty, non-relative segments.
		if !strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") || strings.Contains(p, "//") {
			t.Fatalf("accepted unclean path %q", p)
		}
		for _, seg := range strings.Split(p[1:], "/") {
			if seg == "" || seg == "." || seg == ".." {
				t.Fatalf("accepted path %q with segment %q", p, seg)
			}
		}
		if parentOf(p) != "" {
			if err := ValidatePath(parentOf(p)); err != nil && !strings.HasPrefix(p, "/zookeeper") {
				t.Fatalf("parent of accepted %q rejected: %v", p, err)
			}
		}
	})
}
