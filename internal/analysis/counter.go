package analysis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/go-zookeeper/zk"

	"github.com/zkrecipes/zkrecipes/internal/locktest"
	"github.com/zkrecipes/zkrecipes/mutex"
	"github.com/zkrecipes/zkrecipes/recipe"
)

// The counter: a znode holding "<value> <tag>", incremented by workers
// that each take a mutex, read the node, and write value+1 with a tag of
// their own. An increment is one operation from the read's call to the
// write's return; its output is the value and tag read. Linearizable
// means every increment read exactly what the one before it wrote.
//
// The guarded workload writes with the mutex's Commit (a transaction that
// checks the holder's node); the control writes with a plain setData and
// retries it until it lands, as code that ignores fencing would.

// counterKeys is the number of counters, each under a mutex of its own:
// Porcupine checks them one by one.
const counterKeys = 2

// counterValue is a counter's content.
type counterValue struct {
	v   int64
	tag string
}

func (c counterValue) encode() []byte { return []byte(strconv.FormatInt(c.v, 10) + " " + c.tag) }

// maxCounterData bounds what parseCounter accepts (data is untrusted).
const maxCounterData = 128

func parseCounter(b []byte) (counterValue, error) {
	if len(b) > maxCounterData {
		return counterValue{}, fmt.Errorf("counter data of %d bytes", len(b))
	}
	v, tag, ok := strings.Cut(string(b), " ")
	n, err := strconv.ParseInt(v, 10, 64)
	if !ok || err != nil || tag == "" {
		return counterValue{}, fmt.Errorf("counter data %q", b)
	}
	return counterValue{n, tag}, nil
}

type counterLoad struct {
	name    string
	base    string
	guarded bool
}

func (l *counterLoad) key(k int) string  { return path.Join(l.base, "counter-"+strconv.Itoa(k)) }
func (l *counterLoad) lock(k int) string { return path.Join(l.base, "lock-"+strconv.Itoa(k)) }

func (l *counterLoad) setup(conn *zk.Conn) error {
	for k := 0; k < counterKeys; k++ {
		if err := createAll(conn, l.key(k), counterValue{0, "init"}.encode()); err != nil {
			return err
		}
	}
	return nil
}

// work increments the worker's counter until ctx ends.
func (l *counterLoad) work(ctx context.Context, w *worker, r *rand.Rand) {
	k := w.key
	m, err := mutex.New(w.client, l.lock(k))
	if err != nil {
		w.hist.op(Op{Workload: l.name, Worker: w.id, Kind: "setup", Status: Refused, Err: err.Error()})
		return
	}
	for seq := 0; ctx.Err() == nil; seq++ {
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := m.Lock(lctx)
		cancel()
		if err != nil {
			_ = m.Unlock(context.Background()) // a lost hold must be let go first
			locktest.Sleep(ctx, 50*time.Millisecond)
			continue
		}
		release := w.watchHold(time.Now(), m.Token(), m.Done())
		l.increment(ctx, w, m, k, fmt.Sprintf("w%d.%d", w.id, seq), r)
		release()
		uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = m.Unlock(uctx)
		cancel()
		locktest.Sleep(ctx, time.Duration(r.IntN(20))*time.Millisecond)
	}
}

// increment reads the counter and writes it plus one, and records the
// operation.
func (l *counterLoad) increment(ctx context.Context, w *worker, m *mutex.Mutex, k int, tag string, r *rand.Rand) {
	op := Op{Workload: l.name, Worker: w.id, Kind: "inc", Key: k, Tag: tag, Token: m.Token(), Call: time.Now()}
	data, _, err := w.client.Conn().Get(l.key(k))
	if err != nil {
		return // nothing written: not an operation
	}
	old, err := parseCounter(data)
	if err != nil {
		op.Status, op.Err, op.Return = Refused, err.Error(), time.Now()
		w.hist.op(op)
		return
	}
	op.Old, op.OldTag = old.v, old.tag
	w.critical.Store(true)
	locktest.Sleep(ctx, time.Duration(20+r.IntN(60))*time.Millisecond) // the work
	w.gate.wait(ctx)                                                   // a pause lands between the read and the write
	w.critical.Store(false)
	next := counterValue{old.v + 1, tag}.encode()
	if l.guarded {
		_, err = m.Commit(context.Background(), recipe.SetData(l.key(k), next))
		switch {
		case err == nil:
			op.Status = OK
		case errors.Is(err, recipe.ErrCommitUnknown):
			op.Status = Unknown
		default:
			op.Status = Refused
		}
	} else {
		op.Status, err = l.unguardedWrite(ctx, w, l.key(k), next)
	}
	op.Return = time.Now()
	if err != nil {
		op.Err = err.Error()
	}
	if op.Status == OK {
		w.ok(op.Return)
	}
	w.hist.op(op)
}

// unguardedWrite writes data with a plain setData, retried on any error
// for up to 20 s: no check that the mutex is still held.
func (l *counterLoad) unguardedWrite(ctx context.Context, w *worker, p string, data []byte) (Status, error) {
	deadline := time.Now().Add(20 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if _, err = w.client.Conn().Set(p, data, -1); err == nil {
			return OK, nil
		}
		if !locktest.Sleep(ctx, 100*time.Millisecond) {
			break
		}
	}
	return Unknown, err
}

// finalRead reads every counter at the end of the run, as read operations.
func (l *counterLoad) finalRead(conn *zk.Conn, h *History) error {
	for k := 0; k < counterKeys; k++ {
		call := time.Now()
		if _, err := conn.Sync(l.key(k)); err != nil {
			return err
		}
		data, _, err := conn.Get(l.key(k))
		if err != nil {
			return err
		}
		v, err := parseCounter(data)
		if err != nil {
			return err
		}
		h.op(Op{Workload: l.name, Worker: -1, Kind: "read", Key: k, Call: call, Return: time.Now(), Status: OK, Old: v.v, OldTag: v.tag})
	}
	return nil
}

// counterModel is Porcupine's model of a counter: the state is the value
// and tag last written; an increment is legal if it read exactly that, a
// read if it returns exactly that.
var counterModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		by := map[int][]porcupine.Operation{}
		var keys []int
		for _, o := range history {
			k := o.Input.(counterInput).key
			if _, ok := by[k]; !ok {
				keys = append(keys, k)
			}
			by[k] = append(by[k], o)
		}
		sort.Ints(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, by[k])
		}
		return out
	},
	Init: func() any { return counterValue{0, "init"} },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(counterValue), input.(counterInput), output.(counterValue)
		if out != s {
			return false, s
		}
		if in.read {
			return true, s
		}
		return true, counterValue{s.v + 1, in.tag}
	},
	Equal: func(a, b any) bool { return a.(counterValue) == b.(counterValue) },
	DescribeOperation: func(input, output any) string {
		in, out := input.(counterInput), output.(counterValue)
		if in.read {
			return fmt.Sprintf("read -> %d (%s)", out.v, out.tag)
		}
		return fmt.Sprintf("inc %s: read %d (%s)", in.tag, out.v, out.tag)
	},
	DescribeState: func(state any) string {
		s := state.(counterValue)
		return fmt.Sprintf("%d (%s)", s.v, s.tag)
	},
}

type counterInput struct {
	key  int
	read bool
	tag  string
}

// counterOperations turns a workload's increments and reads into
// Porcupine operations. Refused increments took no effect and are left
// out. An increment of unknown outcome is resolved by its tag: if an
// operation read it, it took effect, and returned at the latest when
// that read did; if nobody ever read it (the final reads included), it
// is left out, which cannot make a linearizable history look otherwise.
// So no operation stays pending to the end of the history, where it
// would multiply Porcupine's search.
func counterOperations(ops []Op, name string) (hist []porcupine.Operation, resolved, dropped int) {
	t0 := time.Time{}
	readBy := map[string]time.Time{} // tag -> earliest return of an op that read it
	for _, o := range ops {
		if o.Workload != name || (o.Kind != "inc" && o.Kind != "read") || o.Status == Refused {
			continue
		}
		if t0.IsZero() || o.Call.Before(t0) {
			t0 = o.Call
		}
		if r, ok := readBy[o.OldTag]; !ok || o.Return.Before(r) {
			readBy[o.OldTag] = o.Return
		}
	}
	for _, o := range ops {
		if o.Workload != name || (o.Kind != "inc" && o.Kind != "read") || o.Status == Refused {
			continue
		}
		ret := o.Return
		if o.Status == Unknown {
			r, ok := readBy[o.Tag]
			if !ok {
				dropped++
				continue
			}
			resolved++
			if r.After(ret) {
				ret = r
			}
		}
		hist = append(hist, porcupine.Operation{
			ClientId: o.Worker + 1,
			Input:    counterInput{key: o.Key, read: o.Kind == "read", tag: o.Tag},
			Output:   counterValue{o.Old, o.OldTag},
			Call:     o.Call.Sub(t0).Nanoseconds(),
			Return:   ret.Sub(t0).Nanoseconds(),
		})
	}
	return hist, resolved, dropped
}

// createAll creates p with data, and its missing ancestors empty.
func createAll(conn *zk.Conn, p string, data []byte) error {
	var dirs []string
	for d := path.Dir(p); d != "/"; d = path.Dir(d) {
		dirs = append([]string{d}, dirs...)
	}
	for _, d := range dirs {
		if _, err := conn.Create(d, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	_, err := conn.Create(p, data, 0, zk.WorldACL(zk.PermAll))
	return err
}
