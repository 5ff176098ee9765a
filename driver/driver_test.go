package driver

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
)

// n, r and w name plain, read and write contenders with sequence i.
func n(i int64) string { return fmt.Sprintf("lock-%010d", i) }
func r(i int64) string { return fmt.Sprintf("_c_%s-read-%010d", uuid, i) }
func w(i int64) string { return fmt.Sprintf("_c_%s-write-%010d", uuid, i) }

func mustLeases(t testing.TB, k int) Driver {
	t.Helper()
	d, err := Leases(k)
	if err != nil {
		t.Fatalf("Leases(%d): %v", k, err)
	}
	return d
}

func held(pos int) Decision { return Decision{Held: true, Position: pos} }
func wait(pos int, watch ...string) Decision {
	return Decision{Watch: watch, Position: pos}
}

func TestDrivers(t *testing.T) {
	A, B, C, D, E := n(1), n(2), n(3), n(4), n(5)
	queue := []string{A, B, C, D, E}
	big := []string{n(2147483647), n(2147483648), n(9999999999)}
	tests := []struct {
		name    string
		driver  Driver
		sorted  []string
		self    string
		want    Decision
		wantErr error
	}{
		{"Mutex head", Mutex(), queue, A, held(0), nil},
		{"Mutex second", Mutex(), queue, B, wait(1, A), nil},
		{"Mutex last", Mutex(), queue, E, wait(4, D), nil},
		{"Mutex alone", Mutex(), []string{C}, C, held(0), nil},
		{"Mutex past 2^31", Mutex(), big, big[2], wait(2, big[1]), nil},
		{"Mutex absent", Mutex(), queue, n(6), Decision{}, ErrNotInQueue},
		{"Mutex empty queue", Mutex(), nil, A, Decision{}, ErrNotInQueue},

		{"Write head", Write(), queue, A, held(0), nil},
		{"Write non-head", Write(), queue, C, wait(2, B), nil},
		{"Write absent", Write(), queue, "", Decision{}, ErrNotInQueue},

		{"Leases(1) head", mustLeases(t, 1), queue, A, held(0), nil},
		{"Leases(1) non-head", mustLeases(t, 1), queue, D, wait(3, C), nil},
		{"Leases(2) first holder", mustLeases(t, 2), queue, A, held(0), nil},
		{"Leases(2) second holder", mustLeases(t, 2), queue, B, held(1), nil},
		{"Leases(2) first waiter watches both holders", mustLeases(t, 2), queue, C, wait(2, A, B), nil},
		{"Leases(2) second waiter", mustLeases(t, 2), queue, D, wait(3, B, C), nil},
		{"Leases(2) third waiter", mustLeases(t, 2), queue, E, wait(4, C, D), nil},
		{"Leases(3) holder", mustLeases(t, 3), queue, C, held(2), nil},
		{"Leases(3) waiter", mustLeases(t, 3), queue, D, wait(3, A, B, C), nil},
		{"Leases(3) second waiter", mustLeases(t, 3), queue, E, wait(4, B, C, D), nil},
		{"Leases(9) fewer nodes than leases", mustLeases(t, 9), queue, E, held(4), nil},
		{"Leases(2) absent", mustLeases(t, 2), queue, "lock-x", Decision{}, ErrNotInQueue},

		{"Read readers only", Read("write-"), []string{r(1), r(2), r(3)}, r(3), held(2), nil},
		{"Read head", Read("write-"), []string{r(1), w(2)}, r(1), held(0), nil},
		{"Read before a write", Read("write-"), []string{r(1), r(2), w(3)}, r(2), held(1), nil},
		{"Read behind a write", Read("write-"), []string{w(1), r(2)}, r(2), wait(1, w(1)), nil},
		{"Read watches the nearest earlier write only", Read("write-"), []string{w(1), r(2), w(3), r(4), r(5)}, r(5), wait(4, w(3)), nil},
		{"Read ignores readers between", Read("write-"), []string{r(1), w(2), r(3), r(4)}, r(4), wait(3, w(2)), nil},
		{"Read unprotected names", Read("write-"), []string{"read-0000000001", "write-0000000002", "read-0000000003"}, "read-0000000003", wait(2, "write-0000000002"), nil},
		{"Read curator names", Read("__WRIT__"), []string{"_c_x-__READ__0000000001", "_c_y-__WRIT__0000000002", "_c_z-__READ__0000000003"}, "_c_z-__READ__0000000003", wait(2, "_c_y-__WRIT__0000000002"), nil},
		{"Read empty write name: everything is a write", Read(""), []string{r(1), r(2), r(3)}, r(3), wait(2, r(2)), nil},
		{"Read absent", Read("write-"), []string{r(1)}, r(2), Decision{}, ErrNotInQueue},
		{"Write behind readers", Write(), []string{r(1), r(2), w(3)}, w(3), wait(2, r(2)), nil},
		{"Write head", Write(), []string{w(1), r(2)}, w(1), held(0), nil},

		{"DriverFunc", DriverFunc(func(sorted []string, self string) (Decision, error) {
			return Decision{Held: self == sorted[len(sorted)-1], Position: 7}, nil
		}), queue, E, Decision{Held: true, Position: 7}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sorted := slices.Clone(tt.sorted)
			got, err := tt.driver.Decide(sorted, tt.self)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Decide error = %v, want %v", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatalf("Decide error = %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Decide(%q, %q) = %+v, want %+v", tt.sorted, tt.self, got, tt.want)
			}
			if !slices.Equal(sorted, tt.sorted) {
				t.Fatalf("Decide modified its input")
			}
			if len(got.Watch) > 0 {
				got.Watch[0] = "changed"
				if !slices.Equal(sorted, tt.sorted) {
					t.Fatalf("Watch shares memory with the input")
				}
			}
		})
	}
}

func TestLeasesInvalid(t *testing.T) {
	for _, k := range []int{0, -1, -1 << 31} {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			d, err := Leases(k)
			if !errors.Is(err, ErrInvalidLeases) {
				t.Errorf("Leases(%d) error = %v, want ErrInvalidLeases", k, err)
			}
			if d != nil {
				t.Errorf("Leases(%d) = %v, want nil", k, d)
			}
		})
	}
}

func TestErrNotInQueueMessage(t *testing.T) {
	_, err := Mutex().Decide([]string{n(1)}, n(2))
	const want = `driver: own node not among the children: "lock-0000000002"`
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %s", err, want)
	}
}

// TestLeasesLiveness replays the scenario that the naive watch (the node
// n places ahead) gets wrong: with two leases held by A and B, waiter C
// must be woken whichever holder releases first.
func TestLeasesLiveness(t *testing.T) {
	A, B, C, D := n(1), n(2), n(3), n(4)
	sem := mustLeases(t, 2)
	queue := []string{A, B, C, D}
	c, _ := sem.Decide(queue, C)
	if c.Held || !slices.Contains(c.Watch, A) || !slices.Contains(c.Watch, B) {
		t.Fatalf("C: %+v, want waiting on both A and B", c)
	}
	d, _ := sem.Decide(queue, D)
	if d.Held || !slices.Equal(d.Watch, []string{B, C}) {
		t.Fatalf("D: %+v, want waiting on [B C]", d)
	}
	for _, gone := range []string{A, B} {
		t.Run(gone+" released", func(t *testing.T) {
			if !slices.Contains(c.Watch, gone) {
				t.Fatalf("C does not watch %s: it would never be woken", gone)
			}
			after := slices.DeleteFunc(slices.Clone(queue), func(s string) bool { return s == gone })
			if c, _ := sem.Decide(after, C); !c.Held {
				t.Errorf("C after %s's release: %+v, want Held", gone, c)
			}
			if d, _ := sem.Decide(after, D); d.Held {
				t.Errorf("D after %s's release: %+v, want waiting", gone, d)
			}
		})
	}
}

// TestLeasesOneIsMutex checks that Leases(1) and Mutex agree everywhere.
func TestLeasesOneIsMutex(t *testing.T) {
	queue := []string{n(1), n(2), n(3), n(4)}
	for _, self := range append(slices.Clone(queue), n(9)) {
		m, merr := Mutex().Decide(queue, self)
		l, lerr := mustLeases(t, 1).Decide(queue, self)
		if !reflect.DeepEqual(m, l) || (merr == nil) != (lerr == nil) {
			t.Errorf("self %s: Mutex = %+v, %v; Leases(1) = %+v, %v", self, m, merr, l, lerr)
		}
	}
}

// DecideAt(sorted, i) is Decide(sorted, sorted[i]) for every driver and
// every index, through a driver's own DecideAt and through the fallback
// for a driver without one; an index out of range is ErrNotInQueue.
func TestDecideAtMatchesDecide(t *testing.T) {
	three, err := Leases(3)
	if err != nil {
		t.Fatal(err)
	}
	queues := [][]string{
		{"lock-0000000001"},
		{"read-0000000001", "read-0000000002", "write-0000000003", "read-0000000004", "write-0000000005", "read-0000000006"},
		{"write-0000000001", "write-0000000002", "read-0000000003", "read-0000000004"},
	}
	for name, d := range map[string]Driver{
		"mutex":  Mutex(),
		"write":  Write(),
		"leases": three,
		"read":   Read("write-"),
		"func": DriverFunc(func(sorted []string, self string) (Decision, error) {
			return Mutex().Decide(sorted, self)
		}),
	} {
		t.Run(name, func(t *testing.T) {
			for _, q := range queues {
				for i, self := range q {
					want, werr := d.Decide(q, self)
					got, gerr := DecideAt(d, q, i)
					if fmt.Sprint(got) != fmt.Sprint(want) || (gerr == nil) != (werr == nil) {
						t.Fatalf("DecideAt(%v, %d) = %+v, %v; Decide gives %+v, %v", q, i, got, gerr, want, werr)
					}
				}
				for _, i := range []int{-1, len(q)} {
					if _, err := DecideAt(d, q, i); !errors.Is(err, ErrNotInQueue) {
						t.Fatalf("DecideAt at %d of %d: %v, want ErrNotInQueue", i, len(q), err)
					}
				}
			}
		})
	}
}
