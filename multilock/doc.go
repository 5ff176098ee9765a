// Package multilock takes a set of locks all or none: any mix of mutexes,
// read or write locks of read/write locks, semaphore leases and custom
// recipes' locks (anything that is a [recipe.Acquirer]), on any number of
// paths (and clients). It is built only on the public API of packages
// mutex, rwlock, semaphore and recipe.
//
//	set, err := multilock.New(
//		orders,           // *mutex.Mutex
//		catalog.Reader(), // read side of an *rwlock.RWLock
//		connections,      // one lease of a *semaphore.Semaphore
//	)
//	if err != nil { ... }
//	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
//	defer cancel()
//	if err := set.Lock(ctx); err != nil { ... } // errors.Is(err, context.DeadlineExceeded)
//	defer set.Unlock(context.Background())
//	write(set.Tokens(), ...)                    // one fencing token per member
//
// # Order
//
// Lock takes the members one at a time in one global order: by path (byte
// order of the strings), then by kind (mutex, write, read, lease, any other
// [recipe.Acquirer]). The
// order does not depend on the order of the arguments of [New], so every
// process asking for overlapping sets takes the locks they share in the
// same order. A process waiting for a member then holds only members
// ordered before it, and the processes ahead of it in that member's line
// wait, if at all, only for members ordered after it: no cycle of waits can
// form, whatever sets are asked for and in whatever order.
//
// # Guarantees
//
//   - All or none: Lock returns nil with every member held, or an error with
//     none held. Before a failed Lock returns, the members it had taken are
//     released, last taken first, and their nodes deleted; a member whose
//     release starts after ctx ended gets 500 ms of its own, after which the
//     deletion goes on in the background while its session lives (the
//     recipes' own rule for a failed acquire).
//   - No deadlock among sets: see Order above, and the caveats below.
//   - Each member keeps its recipe's rules: exclusion, fairness (each member
//     is granted in the order of its own line), herd-free waiting, fencing
//     tokens (Tokens, one per member).
//   - One context: ctx bounds the whole Lock, waits for every member
//     included.
//   - Loss is signalled: Done is closed when any member is lost (session
//     expired, node deleted by someone else, connection silent past the safe
//     window, client closed) and Err names every member lost, each in a
//     [*MemberError], wrapping [ErrLost] and the reason. The other members
//     stay held until Unlock: stop acting on the set when Done closes, then
//     call Unlock, which releases the rest. [Set.Context] gives a context
//     cancelled when any member is lost, its cause that member's error.
//   - Unlock releases every member and reports every member's error, joined.
//
// # Non-guarantees
//
// The set is not atomic on the server: members are taken one after another,
// so for a moment some are held and others not, and another process may see
// that in a member's Participants. Members held elsewhere keep the set
// waiting, and while it waits it holds the members ordered before them:
// a long wait on one member keeps the earlier members from everyone else.
//
// The order prevents deadlock only among callers that hold nothing else
// while they call Lock. A process that already holds a lock outside the set
// (say, a mutex locked on its own) and then asks for a set with members
// ordered before that lock can deadlock with a set that holds those members
// and waits for the lock, as with any locks taken out of order. A handle
// shared by two sets that goroutines lock at the same time shares its holds
// between them (see Reentrancy).
//
// As for every ZooKeeper lock, a process paused (GC, swap, a stopped VM)
// past its session timeout can act after its members were lost and granted
// to others: Done cannot fire while the process is not running. Pass each
// member's token to the systems written under it and have them reject
// stale ones.
//
// # Reentrancy
//
// A Set is reentrant as a mutex handle is: Lock on a set that holds only
// counts, without I/O. The members' own rules apply when a member's handle
// is already held by the caller, outside this set or through another set:
// a mutex handle held by the caller only counts (no wait, no I/O; the
// set's Unlock undoes only its own count and the handle stays held) when
// the ctx given to Lock carries its hold (see mutex.Mutex.Enter), and
// otherwise waits for that hold to be released, as a second Lock on the
// handle does. A read/write lock handle follows the same rule (see
// rwlock.RWLock.Enter and REnter): its read lock is shared, its write
// lock counts when ctx carries the write hold, the read lock is granted
// at once (downgrade) when ctx carries the write hold, and the write lock
// fails with rwlock.ErrUpgrade when ctx carries only the read hold, so the
// set fails. Within the set, each member is taken with the holds of the
// members taken before it, so both sides of one handle are granted. A
// semaphore is never reentrant, so a Lease member takes one more lease.
// Do not unlock a member's handle directly while the set holds it: the set
// then reports that member as not in force.
package multilock
