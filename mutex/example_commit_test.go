package mutex_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// The holder of a mutex keeps a configuration node in ZooKeeper up to
// date. Commit sends the writes in one transaction with a check of the
// mutex's node, so they land only while the lock is held: a holder that
// lost the lock without noticing (paused past its session timeout, its
// node deleted by an operator) cannot overwrite a later holder's writes.
func ExampleMutex_Commit() {
	ctx := context.Background()
	client, err := recipe.Connect(ctx, exampleServers())
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	const lockPath = "/examples/mutex/commit"
	const config = "/examples/mutex-commit-config" // any znode, outside the lock's directory
	m, err := mutex.New(client, lockPath)
	if err != nil {
		log.Fatal(err)
	}
	if err := m.Lock(ctx); err != nil {
		log.Fatal(err)
	}

	// Make the node on first use; a later run finds it.
	if _, err := m.Commit(ctx, recipe.Create(config, nil)); err != nil && !errors.Is(err, recipe.ErrNodeExists) {
		log.Fatal(err)
	}
	// Read, decide, write. SetDataVersion also refuses the write if the
	// node changed since it was read.
	_, version, err := client.Get(ctx, config)
	if err != nil {
		log.Fatal(err)
	}
	update := fmt.Appendf(nil, "replicas=3 token=%d", m.Token()) // says who wrote it
	res, err := m.Commit(ctx, recipe.SetDataVersion(config, update, version))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("written, new version:", res[0].Version == version+1)

	// The same write again expects a version that is gone: nothing applied.
	_, err = m.Commit(ctx, recipe.SetDataVersion(config, update, version))
	if oe := (*recipe.OpError)(nil); errors.As(err, &oe) {
		fmt.Println("op", oe.Index, "refused:", errors.Is(err, recipe.ErrVersionMismatch))
	}

	// Someone deletes the holder's node (as an expiry of its session
	// would): from then on nothing it commits lands.
	if err := client.Conn().Delete(lockPath+"/"+m.Node(), -1); err != nil {
		log.Fatal(err)
	}
	_, err = m.Commit(ctx, recipe.SetData(config, []byte("late")))
	fmt.Println("lost:", errors.Is(err, mutex.ErrLost), errors.Is(err, recipe.ErrNodeDeleted))

	_ = m.Unlock(ctx) // forgets the lost hold
	_, err = m.Commit(ctx, recipe.SetData(config, []byte("later")))
	fmt.Println("nothing held:", errors.Is(err, mutex.ErrNotHeld))
	// Output:
	// written, new version: true
	// op 0 refused: true
	// lost: true true
	// nothing held: true
}
