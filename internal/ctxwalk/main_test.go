package main

import (
	"slices"
	"strings"
	"testing"
)

func TestWalk(t *testing.T) {
	wk, err := walk([]string{"testdata/walk"}, "testdata/walk/a.go:T.Start:ctx")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range wk.stays() {
		got = append(got, s.file[strings.LastIndex(s.file, "/")+1:]+": "+strings.Join(s.funcs, ", "))
	}
	// middle is entered once (from Start, through the derived wctx); the
	// calls of the func value f and of a package not read are not
	// followed; ignored gets no ctx.
	want := []string{"a.go: T.Start", "b.go: middle", "a.go: end", "b.go: U.last"}
	if !slices.Equal(got, want) {
		t.Fatalf("stays\n%q\nwant\n%q", got, want)
	}
	if len(wk.lost) != 2 || !strings.HasPrefix(wk.lost[0], "context.WithCancel (") || !strings.HasPrefix(wk.lost[1], "f (") {
		t.Fatalf("not followed: %q", wk.lost)
	}
	if _, err := walk([]string{"testdata/walk"}, "testdata/walk/a.go:Missing:ctx"); err == nil {
		t.Fatal("a missing function was walked")
	}
}
