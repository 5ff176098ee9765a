// Package faults runs the recipes under injected faults and checks, for
// every fault and every recipe, the properties the library promises:
//
//   - safety: the holds, as their holders saw them, never break the
//     recipe's rule (one mutex holder, one leader, one writer or many
//     readers, at most maxLeases leases). A hold counts from the moment
//     its acquire returned until the earlier of the call to Release and
//     the moment its Done channel closed, so a loss signalled after
//     another client was granted the lock is a violation;
//   - no znode is left behind, neither while the clients are still open
//     (after the faults have healed) nor after they closed;
//   - no Acquire or Release call waits past its context by more than the
//     engine's cleanup grace and a scheduling allowance;
//   - every error is one the API documents.
//
// The package holds the shared harness (recipe adapters, workers, fault
// injectors, checks and the results table); the tests in this directory
// drive it as a fault x recipe matrix and measure scale, and
// internal/soak drives it for a long, random run.
package faults
