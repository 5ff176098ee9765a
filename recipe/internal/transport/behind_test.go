package transport

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"
)

// scriptedRequests answers CreateThenRead's requests as a script says:
// whether the create is seen written before its reply, and which request
// fails. With waitBehind, the create's reply waits until the listing has
// been sent: a CreateThenRead that waited for the create's reply before
// it listed would hang there.
type scriptedRequests struct {
	written    bool  // the create is seen written before its reply
	createErr  error // the create fails
	listErr    error
	getErr     error
	waitBehind bool // the create's reply waits for the listing to be sent

	mu      sync.Mutex
	order   []string // requests in the order they were sent
	expects int
	forgets int
	listed  chan struct{}
}

func (s *scriptedRequests) note(op string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.order = append(s.order, op)
}

func (s *scriptedRequests) expect(path string) (<-chan struct{}, func()) {
	s.mu.Lock()
	s.expects++
	s.mu.Unlock()
	ch := make(chan struct{})
	if s.written {
		close(ch)
	}
	return ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.forgets++
	}
}

func (s *scriptedRequests) Create(path string, data []byte, flags int32, acl []zk.ACL) (string, error) {
	s.note("create")
	if s.waitBehind {
		select {
		case <-s.listed:
		case <-time.After(5 * time.Second):
			return "", errNotBehind
		}
	}
	if s.createErr != nil {
		return "", s.createErr
	}
	return path + "0000000001", nil
}

func (s *scriptedRequests) Children(path string) ([]string, *zk.Stat, error) {
	s.note("children")
	if s.listed != nil {
		close(s.listed)
	}
	if s.listErr != nil {
		return nil, nil, s.listErr
	}
	return []string{"_c_x-lock-0000000001"}, &zk.Stat{}, nil
}

func (s *scriptedRequests) Get(path string) ([]byte, *zk.Stat, error) {
	s.note("get")
	if s.getErr != nil {
		return nil, nil, s.getErr
	}
	return []byte("3"), &zk.Stat{}, nil
}

// errNotBehind is the create's error when no listing was sent behind it.
var errNotBehind = errors.New("no listing sent behind the create")

func (s *scriptedRequests) CreateZxid(path string) (int64, bool) { return 0x42, true }

func TestCreateThenRead(t *testing.T) {
	defer goleak.VerifyNone(t)
	errLost := errors.New("connection lost")
	tests := []struct {
		name     string
		req      *scriptedRequests
		dir      string
		readDir  bool
		wantErr  error
		wantRead bool     // a listing comes back
		wantOps  []string // requests sent, sorted
		wantData bool
		listErr  error
	}{
		{name: "nothing behind", req: &scriptedRequests{written: true}, wantOps: []string{"create"}},
		{name: "listing behind a written create", req: &scriptedRequests{written: true, waitBehind: true},
			dir: "/d", wantRead: true, wantOps: []string{"children", "create"}},
		{name: "listing and data behind", req: &scriptedRequests{written: true, waitBehind: true},
			dir: "/d", readDir: true, wantRead: true, wantData: true, wantOps: []string{"children", "create", "get"}},
		{name: "reply before the write was seen: no reads", req: &scriptedRequests{},
			dir: "/d", readDir: true, wantOps: []string{"create"}},
		{name: "the create fails, the reads sent are waited for", req: &scriptedRequests{written: true, waitBehind: true, createErr: errLost},
			dir: "/d", wantErr: errLost, wantOps: []string{"children", "create"}},
		{name: "the listing fails: its error in the listing", req: &scriptedRequests{written: true, waitBehind: true, listErr: errLost},
			dir: "/d", wantRead: true, listErr: errLost, wantOps: []string{"children", "create"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.req
			if r.waitBehind {
				r.listed = make(chan struct{})
			}
			got, err := CreateThenRead(r, r.expect, nil, "/d/_c_x-lock-", nil, zk.FlagEphemeral|zk.FlagSequence, nil, tc.dir, tc.readDir)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			ops := slices.Sorted(slices.Values(r.order))
			if !slices.Equal(ops, tc.wantOps) {
				t.Fatalf("requests %v, want %v", ops, tc.wantOps)
			}
			if r.expects != r.forgets || (tc.dir == "") != (r.expects == 0) {
				t.Fatalf("%d expects, %d forgets, dir %q", r.expects, r.forgets, tc.dir)
			}
			if err != nil {
				return
			}
			if got.Path != "/d/_c_x-lock-0000000001" || got.Zxid != 0x42 {
				t.Fatalf("created %q with zxid %#x", got.Path, got.Zxid)
			}
			if (got.Read != nil) != tc.wantRead {
				t.Fatalf("read %+v, want one: %v", got.Read, tc.wantRead)
			}
			if got.Read == nil {
				return
			}
			if !errors.Is(got.Read.ErrL, tc.listErr) || (tc.listErr == nil && len(got.Read.Names) != 1) {
				t.Fatalf("listing %v, %v", got.Read.Names, got.Read.ErrL)
			}
			if got.Read.DataRead != tc.wantData || (tc.wantData && string(got.Read.Data) != "3") {
				t.Fatalf("data %q (read: %v)", got.Read.Data, got.Read.DataRead)
			}
		})
	}
}
