package transport_test

import (
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
)

// TestMain closes the shared server after the tests, then looks for
// goroutines left behind.
func TestMain(m *testing.M) { locktest.Main(m) }
