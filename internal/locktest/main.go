package locktest

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// Main runs a package's tests with zktest.Run (which closes the shared
// server afterwards), then, if they passed, fails the run on any goroutine
// still running, and exits with the result. Call it from TestMain:
//
//	func TestMain(m *testing.M) { locktest.Main(m) }
func Main(m *testing.M) {
	code := zktest.Run(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
