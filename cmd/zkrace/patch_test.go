package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The patches zkrecipes ships apply to go-zookeeper as the module cache
// holds it, and change only the four accesses of lastZxid and what
// CreateContainer returns when the connection closed.
func TestPatchAppliesToRelease(t *testing.T) {
	mods, err := goList("-m", "-json", zkModule)
	if err != nil || len(mods) != 1 {
		t.Fatalf("go list: %v, %v", mods, err)
	}
	src := mods[0].Dir
	if src == "" {
		if src, err = download(zkModule + "@" + mods[0].Version); err != nil {
			t.Skipf("go-zookeeper not in the module cache: %v", err)
		}
	}
	patches, err := patchesFor(filepath.Join("..", ".."), mods[0].Version)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	dir, err := patchedCopy(root, src, mods[0].Version, patches)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(src, "conn.go"))
	after, err := os.ReadFile(filepath.Join(dir, "conn.go"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(after), "= c.lastZxid") || strings.Contains(string(after), "c.lastZxid = ") {
		t.Error("a plain access of lastZxid is left")
	}
	if n := strings.Count(string(after), "atomic.LoadInt64(&c.lastZxid)") + strings.Count(string(after), "atomic.StoreInt64(&c.lastZxid"); n != 4 {
		t.Errorf("%d atomic accesses of lastZxid, want 4", n)
	}
	_, container, _ := strings.Cut(string(after), "func (c *Conn) CreateContainer(")
	container, _, _ = strings.Cut(container, "\n}\n")
	if !strings.Contains(container, "if err == ErrConnectionClosed {\n\t\treturn \"\", err\n\t}") {
		t.Error("CreateContainer still reads its reply when the connection closed")
	}
	if got, want := strings.Count(string(after), "\n"), strings.Count(string(before), "\n")+3; got != want {
		t.Errorf("conn.go has %d lines, want the release's and 3: %d", got, want)
	}
	// Made once: a second call finds it.
	again, err := patchedCopy(root, src, mods[0].Version, patches)
	if err != nil || again != dir {
		t.Errorf("second patchedCopy = %q, %v; want %q", again, err, dir)
	}
}

func TestApplyPatchRefusesMismatch(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.go"), []byte("one\ntwo\nthree\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	good := "header\n--- a/a.go\n+++ b/a.go\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n"
	if err := applyPatch(dir, []byte(good)); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.go")); string(b) != "one\n2\nthree\n" {
		t.Errorf("patched file %q", b)
	}
	if err := applyPatch(dir, []byte(good)); err == nil || !strings.Contains(err.Error(), "not in the file") {
		t.Errorf("the same patch again = %v, want its lines not found", err)
	}
	if err := applyPatch(dir, []byte("no diff here\n")); err == nil {
		t.Error("a text with no hunk applied")
	}
}

func TestWriteWork(t *testing.T) {
	root := t.TempDir()
	work, err := writeWork(root, "/home/me/svc", "v1.0.4", "/cache/zk")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(work)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nuse \"/home/me/svc\"\n", "\nreplace github.com/go-zookeeper/zk v1.0.4 => \"/cache/zk\"\n", "\ngo 1."} {
		if !strings.Contains(string(b), want) {
			t.Errorf("go.work lacks %q:\n%s", want, b)
		}
	}
	if !strings.HasPrefix(work, root) {
		t.Errorf("go.work at %s, outside %s", work, root)
	}
}
