// Command custom-recipe shows a recipe that is not in the library, built on
// its engine: a mutex that sheds load (package boundedmutex). One holder,
// one waiter, and a third contender that is refused at once because it
// would wait behind more than one other.
//
//	make zk-up && go run ./examples/custom-recipe -zk 127.0.0.1:21811
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/zkrecipes/zkrecipes/examples/custom-recipe/boundedmutex"
	"github.com/zkrecipes/zkrecipes/recipe"
)

var (
	servers = flag.String("zk", "127.0.0.1:21811", "ZooKeeper servers, comma-separated")
	path    = flag.String("path", "/examples/custom-recipe", "lock path")
)

func main() {
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Each contender has its own session, as separate processes would.
	contender := func(name string) *boundedmutex.Mutex {
		c, err := recipe.Connect(ctx, strings.Split(*servers, ","))
		if err != nil {
			log.Fatal(err)
		}
		m, err := boundedmutex.New(c, *path, 1, []byte(name)) // at most 1 ahead
		if err != nil {
			log.Fatal(err)
		}
		return m
	}
	a, b, c := contender("a"), contender("b"), contender("c")

	holdA, err := a.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("a holds, token", holdA.Token())

	bHeld := make(chan *recipe.Hold)
	go func() {
		h, err := b.Lock(ctx) // one ahead (a): b waits
		if err != nil {
			log.Fatal(err)
		}
		bHeld <- h
	}()
	for { // until b is in line
		ps, err := a.Participants(ctx)
		if err != nil {
			log.Fatal(err)
		}
		if len(ps) == 2 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("b waits behind a")

	_, err = c.Lock(ctx) // two ahead (a, b): refused at once
	fmt.Println("c refused:", errors.Is(err, boundedmutex.ErrQueueFull))

	if err := holdA.Release(ctx); err != nil {
		log.Fatal(err)
	}
	holdB := <-bHeld
	fmt.Println("b holds after a, token greater:", holdB.Token() > holdA.Token())
	if err := holdB.Release(ctx); err != nil {
		log.Fatal(err)
	}
}
