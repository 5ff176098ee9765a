// Package analysis runs the recipes against a real ZooKeeper ensemble
// while a nemesis injects faults between the servers and between the
// clients and the servers, records what every client did and saw, and
// checks the history:
//
//   - a counter in ZooKeeper, incremented under a mutex and written with
//     a guarded transaction (Commit), checked for linearizability with
//     Porcupine;
//   - a store outside ZooKeeper that accepts a write only if its fencing
//     token is not older than one it accepted, checked for writes of two
//     grants interleaving in the store's order;
//   - a semaphore, checked by its holders' own intervals (from the grant
//     until the holder is told it lost the lease or releases it): never
//     more than its leases at once;
//   - leader.Run with Proclaim: one term at a time, and no Proclaim of a
//     term landing once a later term has begun;
//   - progress: after every fault, every workload succeeds again within a
//     stated bound.
//
// Two controls run beside the guarded workloads under the same faults and
// must be caught, each in at least one run of a set: a counter whose
// writes skip Commit's check (Porcupine must find the history not
// linearizable) and a store workload whose holders ignore Done and whose
// store does not check tokens (the interval checker must flag it).
//
// The schedule of faults comes from a seed, so a run can be replayed;
// which member leads is decided by ZooKeeper, so a schedule names members
// by role (the leader, a follower) where that matters. docs/analysis.md
// gives the method and the results; cmd/zkanalysis runs it.
package analysis
