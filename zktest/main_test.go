package zktest_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/zkrecipes/zkrecipes/zktest"
)

// TestMain runs the tests, stops the shared server and then checks that
// no goroutine (proxy, connection or process waiter) outlived its test.
func TestMain(m *testing.M) {
	code := zktest.Run(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
