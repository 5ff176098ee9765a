package main

import (
	"bytes"
	"flag"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/zkrecipes/zkrecipes/zktest"
)

func TestMain(m *testing.M) { zktest.Main(m) }

// The program runs against a real server and prints what its README says.
func TestProgram(t *testing.T) {
	srv := zktest.Shared(t)
	for name, value := range map[string]string{"zk": srv.Addr(), "path": zktest.UniquePath(t)} {
		if err := flag.Set(name, value); err != nil {
			t.Fatal(err)
		}
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	main()
	os.Stdout = stdout
	w.Close()
	var out bytes.Buffer
	io.Copy(&out, r)
	for _, want := range []string{"a holds, token", "b waits behind a", "c refused: true", "b holds after a, token greater: true"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
