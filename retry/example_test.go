package retry_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zkrecipes/zkrecipes/retry"
)

func ExampleDo() {
	attempts := 0
	err := retry.Do(context.Background(), retry.NTimes(3, time.Millisecond), func(ctx context.Context) error {
		attempts++
		if attempts < 3 {
			return zk.ErrConnectionClosed // transient: retried
		}
		return nil
	})
	fmt.Println(attempts, err)
	// Output: 3 <nil>
}

func ExampleDo_gaveUp() {
	err := retry.Do(context.Background(), retry.NTimes(2, 0), func(ctx context.Context) error {
		return fmt.Errorf("create /lock: %w", zk.ErrNoServer)
	})
	fmt.Println(err)
	fmt.Println(errors.Is(err, retry.ErrGaveUp), errors.Is(err, zk.ErrNoServer))
	// Output:
	// retry: gave up after 3 attempts: create /lock: zk: could not connect to a server
	// true true
}

func ExampleDo_permanent() {
	attempts := 0
	err := retry.Do(context.Background(), retry.Forever(time.Second), func(ctx context.Context) error {
		attempts++
		return zk.ErrNodeExists // logical: returned at once, unchanged
	})
	fmt.Println(attempts, err == zk.ErrNodeExists)
	// Output: 1 true
}

func ExampleDoNotify() {
	attempts := 0
	err := retry.DoNotify(context.Background(), retry.NTimes(5, time.Millisecond),
		func(ctx context.Context) error {
			attempts++
			if attempts <= 2 {
				return zk.ErrConnectionClosed
			}
			return nil
		},
		func(err error, wait time.Duration) {
			fmt.Printf("attempt failed: %v; retrying in %v\n", err, wait)
		})
	fmt.Println(err)
	// Output:
	// attempt failed: zk: connection closed; retrying in 1ms
	// attempt failed: zk: connection closed; retrying in 1ms
	// <nil>
}

func ExampleRetryable() {
	for _, err := range []error{
		zk.ErrConnectionClosed,
		fmt.Errorf("get /a: %w", zk.ErrNoServer),
		zk.ErrSessionExpired,
		zk.ErrNoNode,
		context.Canceled,
	} {
		fmt.Printf("%v: %v\n", err, retry.Retryable(err))
	}
	// Output:
	// zk: connection closed: true
	// get /a: zk: could not connect to a server: true
	// zk: session has been expired by the server: false
	// zk: node does not exist: false
	// context canceled: false
}

func ExampleDefault() {
	// Default is what the recipes use when no policy is given: sleeps of
	// about 50ms, 100ms, 200ms, ... capped at 2s, at most 29 retries, and
	// no retry starting more than 30 s after the first attempt.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = retry.Do(ctx, retry.Default(), func(ctx context.Context) error {
		return nil // e.g. conn.Create(...)
	})
}
