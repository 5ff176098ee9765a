// Package reentrant is the handle every lock recipe of this module is made
// of, for recipes of your own too: a [Handle] on a [recipe.Lock] takes the
// lock reentrantly (a second Take on a handle that holds only counts),
// runs one call at a time, releases when Release has been called as many
// times as Take, and reports the current hold's loss signal, token and
// node with the recipe's own sentinels. A Handle is a [recipe.Held] and a
// [recipe.Acquirer], so it can be a member of a multilock set or held by
// the zklock command.
//
//	lk, err := recipe.NewLock(client, "/locks/orders", recipe.LockSpec{
//		Recipe: "mylock", LockName: "lock-", Driver: driver.Mutex(),
//		NotAcquired: ErrNotAcquired, WouldBlock: ErrLocked, NotHeld: ErrNotHeld,
//	}, recipe.DefaultNodeData())
//	...
//	type MyLock struct{ *reentrant.Handle }
//	m := MyLock{reentrant.New(lk)}
//
// [Turn] is its one-call-at-a-time part, for handles that keep more than
// one hold (the read/write lock) or are not reentrant (leader election).
package reentrant
