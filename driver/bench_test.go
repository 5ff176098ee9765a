package driver_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/uuid"

	"github.com/zkrecipes/zkrecipes/driver"
)

// listing returns n protected mutex node names in a shuffled order, as a
// server lists a lock directory's children.
func listing(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("_c_%s-lock-%010d", uuid.NewString(), i+1)
	}
	r := rand.New(rand.NewPCG(1, 2))
	r.Shuffle(n, func(i, j int) { names[i], names[j] = names[j], names[i] })
	return names
}

func BenchmarkSequence(b *testing.B) {
	names := listing(64)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, ok := driver.Sequence(names[i%len(names)], "lock-", "__lock__"); !ok {
			b.Fatal("no sequence")
		}
	}
}

func BenchmarkSort(b *testing.B) {
	for _, n := range []int{8, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			names := listing(n)
			b.ReportAllocs()
			for b.Loop() {
				driver.Sort(names, "lock-", "__lock__")
			}
		})
	}
}
