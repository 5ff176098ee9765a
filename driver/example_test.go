package driver_test

import (
	"fmt"

	"github.com/zkrecipes/zkrecipes/driver"
)

func ExampleMutex() {
	// The children of /locks/job, as returned by ZooKeeper (in no
	// particular order), including a child that is not a contender.
	children := []string{
		"_c_9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d-lock-0000000043",
		"config",
		"lock-0000000041",
		"_c_2f0e3c84-1d5e-4b0e-9c1a-3b2a1f5e6d7c-lock-0000000042",
	}
	sorted := driver.Sort(driver.Filter(children, "lock-"), "lock-")
	for _, self := range sorted {
		d, err := driver.Mutex().Decide(sorted, self)
		if err != nil {
			panic(err)
		}
		fmt.Println(d.Position, d.Held, d.Watch)
	}
	// Output:
	// 0 true []
	// 1 false [lock-0000000041]
	// 2 false [_c_2f0e3c84-1d5e-4b0e-9c1a-3b2a1f5e6d7c-lock-0000000042]
}

func ExampleLeases() {
	sem, err := driver.Leases(2)
	if err != nil {
		panic(err)
	}
	sorted := []string{"lock-0000000001", "lock-0000000002", "lock-0000000003", "lock-0000000004"}
	for _, self := range sorted {
		d, _ := sem.Decide(sorted, self)
		fmt.Println(self, d.Held, d.Watch)
	}
	// Output:
	// lock-0000000001 true []
	// lock-0000000002 true []
	// lock-0000000003 false [lock-0000000001 lock-0000000002]
	// lock-0000000004 false [lock-0000000002 lock-0000000003]
}

func ExampleRead() {
	lockNames := []string{"read-", "write-"}
	sorted := driver.Sort([]string{
		"read-0000000004", "write-0000000003", "read-0000000002", "read-0000000001", "read-0000000005",
	}, lockNames...)
	for _, self := range sorted {
		drv := driver.Read("write-")
		if _, isWrite := driver.Sequence(self, "write-"); isWrite {
			drv = driver.Write()
		}
		d, _ := drv.Decide(sorted, self)
		fmt.Println(self, d.Held, d.Watch)
	}
	// Output:
	// read-0000000001 true []
	// read-0000000002 true []
	// write-0000000003 false [read-0000000002]
	// read-0000000004 false [write-0000000003]
	// read-0000000005 false [write-0000000003]
}

func ExampleSequence() {
	fmt.Println(driver.Sequence("_c_2f0e3c84-1d5e-4b0e-9c1a-3b2a1f5e6d7c-lock-0000000042", "lock-"))
	fmt.Println(driver.Sequence("lock-2147483648", "lock-"))
	fmt.Println(driver.Sequence("lock--2147483648", "lock-"))
	fmt.Println(driver.Sequence("config", "lock-"))
	// Output:
	// 42 true
	// 2147483648 true
	// 0 false
	// 0 false
}

func ExampleSort() {
	fmt.Println(driver.Sort([]string{"lock-10", "junk", "lock-9", "lock-2147483648"}, "lock-"))
	// Output: [lock-9 lock-10 lock-2147483648 junk]
}

func ExampleClassify() {
	// The children of a lock directory that a mutex, kazoo's Lock and
	// ReadLock, Curator's semaphore and an application have written to.
	for _, name := range []string{
		"_c_2f0e3c84-1d5e-4b0e-9c1a-3b2a1f5e6d7c-lock-0000000041",
		"3c9e5a1f0b7d4e2a8c6b1d0e9f7a5b3c__lock__0000000042",
		"3c9e5a1f0b7d4e2a8c6b1d0e9f7a5b3c__rlock__0000000043",
		"leases",
		"config",
	} {
		fmt.Printf("%-55s %s\n", name, driver.Classify(name))
	}
	// Output:
	// _c_2f0e3c84-1d5e-4b0e-9c1a-3b2a1f5e6d7c-lock-0000000041 a lock node of this library's kinds
	// 3c9e5a1f0b7d4e2a8c6b1d0e9f7a5b3c__lock__0000000042      a lock node of another library's kind
	// 3c9e5a1f0b7d4e2a8c6b1d0e9f7a5b3c__rlock__0000000043     a lock node of no known kind
	// leases                                                  a child of another library's semaphore layout
	// config                                                  not a lock node
}
