package driver

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

const uuid = "2f0e3c84-1d5e-4b0e-9c1a-3b2a1f5e6d7c"

func TestSequence(t *testing.T) {
	lock := []string{"lock-"}
	rw := []string{"read-", "write-"}
	curator := []string{"__READ__", "__WRIT__"}
	tests := []struct {
		name      string
		node      string
		lockNames []string
		want      int64
		wantOK    bool
	}{
		{"protected", "_c_" + uuid + "-lock-0000000042", lock, 42, true},
		{"unprotected", "lock-0000000042", lock, 42, true},
		{"zero", "lock-0000000000", lock, 0, true},
		{"single digit", "lock-7", lock, 7, true},
		{"MaxInt32", "lock-2147483647", lock, 2147483647, true},
		{"MaxInt32+1", "lock-2147483648", lock, 2147483648, true},
		{"ten nines", "lock-9999999999", lock, 9999999999, true},
		{"MaxInt64", "lock-9223372036854775807", lock, 9223372036854775807, true},
		{"MaxInt64+1 overflows", "lock-9223372036854775808", lock, 0, false},
		{"19 nines overflow", "lock-9999999999999999999", lock, 0, false},
		{"20 digits", "lock-00000000000000000042", lock, 0, false},
		{"25 digits", "lock-1234567890123456789012345", lock, 0, false},
		{"empty name", "", lock, 0, false},
		{"no digits", "lock-", lock, 0, false},
		{"letters", "lock-abc", lock, 0, false},
		{"digits then letters", "lock-0000000042x", lock, 0, false},
		{"minus sign", "lock--2147483648", lock, 0, false},
		{"plus sign", "lock-+42", lock, 0, false},
		{"inner space", "lock- 42", lock, 0, false},
		{"trailing space", "lock-42 ", lock, 0, false},
		{"hex", "lock-0x2A", lock, 0, false},
		{"underscore", "lock-1_000", lock, 0, false},
		{"non-ASCII digits", "lock-٤٢", lock, 0, false},
		{"no lock name", "foo-0000000042", lock, 0, false},
		{"lock name also inside the uuid", "_c_" + uuid + "-e-0000000042", []string{"e-"}, 42, true},
		{"lock name twice", "lock-0000000001-lock-0000000042", lock, 42, true},
		{"lock name in the prefix", "_c_lock-7-lock-0000000042", lock, 42, true},
		{"last occurrence not followed by digits", "lock-0000000042-lock-x", lock, 0, false},
		{"lock name at the end", "lock-0000000042lock-", lock, 0, false},
		{"read", "_c_" + uuid + "-read-0000000003", rw, 3, true},
		{"write", "_c_" + uuid + "-write-0000000004", rw, 4, true},
		{"write name after read name", "read-0000000001-write-0000000005", rw, 5, true},
		{"curator read", "_c_" + uuid + "-__READ__0000000005", curator, 5, true},
		{"curator write", "_c_" + uuid + "-__WRIT__2147483648", curator, 2147483648, true},
		{"curator write, wrong lock names", "_c_" + uuid + "-__WRIT__0000000005", rw, 0, false},
		{"no lock names", "lock-0000000042", nil, 0, false},
		{"empty lock name ignored", "lock-0000000042", []string{""}, 0, false},
		{"empty lock name among others", "lock-0000000042", []string{"", "lock-"}, 42, true},
		{"same position: longest wins", "lock-0000000042", []string{"lock", "lock-"}, 42, true},
		{"same position, other order", "lock-0000000042", []string{"lock-", "lock"}, 42, true},
		{"later occurrence wins", "lock-0000000042", []string{"lock-", "k-"}, 42, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Sequence(tt.node, tt.lockNames...)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("Sequence(%q, %q) = %d, %v; want %d, %v", tt.node, tt.lockNames, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestSort(t *testing.T) {
	pA := "_c_" + uuid + "-lock-0000000002"
	pB := "_c_00000000-0000-0000-0000-000000000000-lock-0000000001"
	tests := []struct {
		name      string
		in        []string
		lockNames []string
		want      []string
	}{
		{"nil", nil, []string{"lock-"}, []string{}},
		{"empty", []string{}, []string{"lock-"}, []string{}},
		{"single", []string{"lock-0000000001"}, []string{"lock-"}, []string{"lock-0000000001"}},
		{
			"by sequence, not by name",
			[]string{"lock-0000000003", pA, pB},
			[]string{"lock-"},
			[]string{pB, pA, "lock-0000000003"},
		},
		{
			"numeric, not lexical",
			[]string{"lock-10", "lock-9", "lock-0000000008"},
			[]string{"lock-"},
			[]string{"lock-0000000008", "lock-9", "lock-10"},
		},
		{
			"past 2^31",
			[]string{"lock-9999999999", "lock-2147483648", "lock-2147483647"},
			[]string{"lock-"},
			[]string{"lock-2147483647", "lock-2147483648", "lock-9999999999"},
		},
		{
			"mixed parsable and unparsable",
			[]string{"zzz", "lock-0000000003", "junk", pB, "lock-0000000002", "lock-x", pA, "lock--1", ""},
			[]string{"lock-"},
			[]string{pB, pA, "lock-0000000002", "lock-0000000003", "", "junk", "lock--1", "lock-x", "zzz"},
		},
		{
			"ties broken by name",
			[]string{"lock-0000000002", "b-lock-2", "a-lock-0000000002"},
			[]string{"lock-"},
			[]string{"a-lock-0000000002", "b-lock-2", "lock-0000000002"},
		},
		{"duplicates", []string{"b", "lock-1", "a", "b", "lock-1"}, []string{"lock-"}, []string{"lock-1", "lock-1", "a", "b", "b"}},
		{
			"read/write queue",
			[]string{"write-0000000004", "_c_" + uuid + "-read-0000000003", "read-0000000001", "write-0000000002"},
			[]string{"read-", "write-"},
			[]string{"read-0000000001", "write-0000000002", "_c_" + uuid + "-read-0000000003", "write-0000000004"},
		},
		{"no lock names: by name", []string{"lock-2", "lock-10", "a"}, nil, []string{"a", "lock-10", "lock-2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.in)
			got := Sort(in, tt.lockNames...)
			if !slices.Equal(got, tt.want) || got == nil {
				t.Fatalf("Sort(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if !slices.Equal(in, tt.in) {
				t.Fatalf("Sort modified its input: %q, was %q", in, tt.in)
			}
			if len(got) > 0 {
				got[0] = "changed"
				if !slices.Equal(in, tt.in) {
					t.Fatal("Sort's result shares memory with its input")
				}
			}
			// The order does not depend on the input order.
			r := rand.New(rand.NewPCG(1, 2))
			for range 20 {
				shuffled := slices.Clone(tt.in)
				r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
				if got := Sort(shuffled, tt.lockNames...); !slices.Equal(got, tt.want) {
					t.Fatalf("Sort(%q) = %q, want %q", shuffled, got, tt.want)
				}
			}
		})
	}
}

func TestFilter(t *testing.T) {
	tests := []struct {
		name      string
		in        []string
		lockNames []string
		want      []string
	}{
		{"nil", nil, []string{"lock-"}, []string{}},
		{
			"keeps contenders in order",
			[]string{"lock-0000000002", "config", "_c_" + uuid + "-lock-0000000001", "lock-x", "lease"},
			[]string{"lock-"},
			[]string{"lock-0000000002", "_c_" + uuid + "-lock-0000000001", "lock-x"},
		},
		{
			"several lock names",
			[]string{"read-0000000001", "other", "write-0000000002", "lock-0000000003"},
			[]string{"read-", "write-"},
			[]string{"read-0000000001", "write-0000000002"},
		},
		{"no lock names", []string{"lock-0000000001"}, nil, []string{}},
		{"empty lock name ignored", []string{"lock-0000000001", "x"}, []string{""}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.in)
			got := Filter(in, tt.lockNames...)
			if !slices.Equal(got, tt.want) || got == nil {
				t.Fatalf("Filter(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if !slices.Equal(in, tt.in) {
				t.Fatalf("Filter modified its input: %q, was %q", in, tt.in)
			}
		})
	}
}

func TestKindOf(t *testing.T) {
	tests := []struct {
		name, lockName, kind string
		ok                   bool
	}{
		{"_c_2b7a6e4e-6d7b-4a5e-9c1e-0a4b5c6d7e8f-lock-0000000007", "lock-", "mutex", true},
		{"lock-0000000001", "lock-", "mutex", true},
		{"_c_2b7a6e4e-6d7b-4a5e-9c1e-0a4b5c6d7e8f-__READ__0000000002", "__READ__", "read", true},
		{"_c_2b7a6e4e-6d7b-4a5e-9c1e-0a4b5c6d7e8f-__WRIT__0000000003", "__WRIT__", "write", true},
		{"x-read-0000000004", "read-", "read", true},
		{"write-0000000005", "write-", "write", true},
		{"_c_x-lease-0000000006", "lease-", "lease", true},
		{"_c_x-latch-0000000008", "latch-", "latch", true},
		{"3c9e5a1f0b7d4e2a8c6b1d0e9f7a5b3c__lock__0000000009", "__lock__", "mutex", true}, // kazoo's Lock
		{"3c9e5a1f0b7d4e2a8c6b1d0e9f7a5b3c__rlock__0000000010", "", "", false},            // kazoo's ReadLock
		{"lock-", "", "", false},          // no sequence
		{"lock-12a", "", "", false},       // not digits at the end
		{"job-0000000001", "", "", false}, // unknown lock name
		{"lock-write-x0000000001", "", "", false},
		{"", "", "", false},
		{"lock-" + strings.Repeat("1", 20), "", "", false}, // too many digits
	}
	for _, tt := range tests {
		ln, kind, ok := KindOf(tt.name)
		if ln != tt.lockName || kind != tt.kind || ok != tt.ok {
			t.Errorf("KindOf(%q) = %q, %q, %v; want %q, %q, %v", tt.name, ln, kind, ok, tt.lockName, tt.kind, tt.ok)
		}
	}
	if got := LockNames(); len(got) != 8 || got[0] != "lock-" || !slices.Contains(got, "__lock__") {
		t.Errorf("LockNames() = %v", got)
	}
}

func TestKindTable(t *testing.T) {
	tests := []struct {
		lockName, name string
		queue          []string
		// a sorted queue, and which of its nodes hold (those of this kind
		// by the kind's driver)
		sorted []string
		held   []bool
	}{
		{"lock-", "mutex", []string{"lock-", "__lock__"}, []string{"lock-1", "__lock__2", "lock-3"}, []bool{true, false, false}},
		{"__lock__", "mutex", []string{"lock-", "__lock__"}, []string{"__lock__1", "lock-2", "__lock__3"}, []bool{true, false, false}},
		{"latch-", "latch", []string{"latch-"}, []string{"latch-1", "latch-2"}, []bool{true, false}},
		{"read-", "read", []string{"read-", "write-"}, []string{"read-1", "read-2", "write-3", "read-4"}, []bool{true, true, false, false}},
		{"write-", "write", []string{"read-", "write-"}, []string{"write-1", "write-2"}, []bool{true, false}},
		{"__READ__", "read", []string{"__READ__", "__WRIT__"}, []string{"__READ__1", "__WRIT__2", "__READ__3"}, []bool{true, false, false}},
		{"__WRIT__", "write", []string{"__READ__", "__WRIT__"}, []string{"__WRIT__1", "__WRIT__2"}, []bool{true, false}},
		{"lease-", "lease", []string{"lease-"}, []string{"lease-1", "lease-2", "lease-3"}, []bool{true, true, false}},
	}
	for _, tt := range tests {
		k, ok := KindNamed(tt.lockName)
		if !ok || k.Name != tt.name || !slices.Equal(k.Queue(), tt.queue) {
			t.Errorf("KindNamed(%q) = %+v (queue %v), %v; want %s, queue %v", tt.lockName, k, k.Queue(), ok, tt.name, tt.queue)
			continue
		}
		d, err := k.Driver(2)
		if err != nil {
			t.Fatalf("%s: Driver(2): %v", tt.lockName, err)
		}
		for i, n := range tt.sorted {
			if !strings.HasPrefix(n, tt.lockName) {
				continue // judged by the other side's driver
			}
			if dec, err := d.Decide(tt.sorted, n); err != nil || dec.Held != tt.held[i] {
				t.Errorf("%s driver: %s in %v holds %v (%v), want %v", tt.lockName, n, tt.sorted, dec.Held, err, tt.held[i])
			}
		}
	}
	if k, _ := KindNamed("lease-"); k.Curator != "" {
		t.Errorf("the semaphore's nodes are not Curator's: %+v", k)
	}
	if k, _ := KindNamed("lease-"); func() error { _, err := k.Driver(0); return err }() == nil {
		t.Error("lease driver without a number of leases: no error")
	}
	if _, ok := KindNamed("job-"); ok {
		t.Error("KindNamed(job-) found a kind")
	}
	for _, k := range kinds {
		if k.Foreign != (k.LockName == "__lock__") || (k.Kazoo != "") != k.Foreign {
			t.Errorf("%s: Foreign %v, Kazoo %q: only kazoo's __lock__ is foreign", k.LockName, k.Foreign, k.Kazoo)
		}
	}
}

func TestClassify(t *testing.T) {
	const kazoo = "3c9e5a1f0b7d4e2a8c6b1d0e9f7a5b3c"
	tests := []struct {
		name string
		want Class
	}{
		{"_c_2b7a6e4e-6d7b-4a5e-9c1e-0a4b5c6d7e8f-lock-0000000007", Native},    // ours, Curator's InterProcessMutex
		{"_c_2b7a6e4e6d7b4a5e9c1e0a4b5c6d7e8f-lock-0000000007", Native},        // go-zookeeper's zk.Lock
		{"_c_2b7a6e4e-6d7b-4a5e-9c1e-0a4b5c6d7e8f-__WRIT__0000000001", Native}, // Curator's write lock
		{"_c_2b7a6e4e-6d7b-4a5e-9c1e-0a4b5c6d7e8f-latch-0000000001", Native},   // LeaderLatch
		{"_c_2b7a6e4e-6d7b-4a5e-9c1e-0a4b5c6d7e8f-lease-0000000001", Native},   // our semaphore
		{"lock-1", Native},                           // hand-made, short sequence
		{kazoo + "__lock__0000000002", Foreign},      // kazoo's Lock, WriteLock, Election
		{kazoo + "__rlock__0000000003", Unknown},     // kazoo's ReadLock
		{"member-0000000004", Unknown},               // some other recipe
		{"0000000005", Unknown},                      // a bare sequence
		{"lock-" + strings.Repeat("1", 20), Unknown}, // too long for a sequence of ours
		{"leases", Layout}, {"locks", Layout},        // Curator's InterProcessSemaphoreV2
		{kazoo, Layout}, {"3c9e5a1f0b7d4e2a8c6b1d0e9f71234567890", Unknown}, // kazoo's Semaphore lease; hex ending in a sequence
		{"config", Unrelated}, {"leases2", Unrelated}, {"lock", Unrelated}, // persistent children
		{"shard-123456789", Unrelated}, {"3C9E5A1F0B7D4E2A8C6B1D0E9F7A5B3C", Unrelated}, {"", Unrelated}, // fewer than ten digits at the end
		{"Leases", Unrelated}, {"locks/x", Unrelated}, {"version-2024", Unrelated},
	}
	for _, tt := range tests {
		if got := Classify(tt.name); got != tt.want {
			t.Errorf("Classify(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
	for c := Unrelated; c <= Layout+1; c++ {
		if c.String() == "" {
			t.Errorf("Class(%d) has no text", int(c))
		}
	}
}
