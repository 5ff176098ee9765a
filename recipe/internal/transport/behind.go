package transport

import "github.com/go-zookeeper/zk"

// Requests are the blocking requests CreateThenRead combines: [Conn]'s, or
// a test's stand-in for ZooKeeper, which then runs the same path.
type Requests interface {
	Create(path string, data []byte, flags int32, acl []zk.ACL) (string, error)
	Children(path string) ([]string, *zk.Stat, error)
	Get(path string) ([]byte, *zk.Stat, error)
	CreateZxid(path string) (int64, bool)
}

// Created is what CreateThenRead learnt.
type Created struct {
	Path string // the node created
	Zxid int64  // its zxid as seen on the wire, 0 when unknown
	// Read is what was read behind the create; nil when the reads were
	// not sent (not asked for, or the create's reply came before its
	// request was seen written).
	Read *Listing
}

// Listing is what a create learnt of its directory in its round trip.
type Listing struct {
	Names    []string // the directory's children
	ErrL     error
	Data     []byte // the directory's data, when asked for
	ErrD     error
	DataRead bool // the data was asked for
}

// Spawn runs f on a goroutine that starts now: never one that waits for
// the caller. nil means the go statement.
type Spawn func(f func())

// Expect returns a channel closed once a create request for path has been
// written to the connection (never, when that cannot be told), and a
// function to call when no longer interested.
type Expect func(path string) (written <-chan struct{}, forget func())

// CreateThenRead creates path and, with dir set, lists dir (and reads its
// data, with readDir) in the same round trip. The reads are sent the
// moment the create is seen written, so they follow it on the connection,
// and the server, which answers a session's requests in order, reads
// after it created the node. It returns once the create and the reads
// sent are answered; the reads' errors are in the Listing, the create's
// is returned. The reads wait for the create's write, and then for their
// replies, on spawn's goroutines.
func CreateThenRead(r Requests, expect Expect, spawn Spawn, path string, data []byte, flags int32, acl []zk.ACL, dir string, readDir bool) (Created, error) {
	var (
		stop  chan struct{}
		reads chan *Listing
	)
	if dir != "" {
		written, forget := expect(path)
		defer forget()
		if spawn == nil {
			spawn = func(f func()) { go f() }
		}
		stop, reads = make(chan struct{}), make(chan *Listing, 1)
		spawn(func() {
			select {
			case <-written:
				reads <- readBehind(r, spawn, dir, readDir)
			case <-stop:
				reads <- nil
			}
		})
	}
	p, err := r.Create(path, data, flags, acl)
	var read *Listing
	if reads != nil {
		close(stop)
		read = <-reads
	}
	if err != nil {
		return Created{}, err
	}
	zxid, _ := r.CreateZxid(p)
	return Created{Path: p, Zxid: zxid, Read: read}, nil
}

// readBehind sends the reads of CreateThenRead, the listing and the data
// together, and returns once both are answered.
func readBehind(r Requests, spawn Spawn, dir string, readDir bool) *Listing {
	q := &Listing{DataRead: readDir}
	var data chan struct{}
	if readDir {
		data = make(chan struct{})
		spawn(func() {
			defer close(data)
			q.Data, _, q.ErrD = r.Get(dir)
		})
	}
	q.Names, _, q.ErrL = r.Children(dir)
	if data != nil {
		<-data
	}
	return q
}
