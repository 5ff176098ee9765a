package recipe

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/zkrecipes/zkrecipes/telemetry"
)

// instruments are the client's metric instruments. Every instrument is
// usable even when its creation failed (the otel API then hands out no-ops).
type instruments struct {
	acquireDuration metric.Float64Histogram
	acquisitions    metric.Int64Counter
	timeouts        metric.Int64Counter
	losses          metric.Int64Counter
	holders         metric.Int64UpDownCounter
	waiters         metric.Int64UpDownCounter
	holdDuration    metric.Float64Histogram
}

// shared holds the instruments of the meter provider the last client was
// made with, for the next client made with the same one. OpenTelemetry's
// global provider, until a program installs its own, keeps every
// instrument created on it (to hand them to the real provider later), so
// instruments made per client would grow without bound in a program that
// makes many clients.
var shared struct {
	sync.Mutex
	mp  metric.MeterProvider
	ins instruments
}

// instrumentsFor returns the instruments of mp: the shared ones when the
// last client was made with mp too.
func instrumentsFor(mp metric.MeterProvider) (instruments, error) {
	shared.Lock()
	defer shared.Unlock()
	t := reflect.TypeOf(mp)
	if shared.mp != nil && t == reflect.TypeOf(shared.mp) && t.Comparable() && shared.mp == mp {
		return shared.ins, nil
	}
	ins, err := newInstruments(mp)
	if err == nil && t != nil && t.Comparable() {
		shared.mp, shared.ins = mp, ins
	}
	return ins, err
}

func newInstruments(mp metric.MeterProvider) (instruments, error) {
	m := mp.Meter(instrumentationName)
	var ins instruments
	var err, e error
	ins.acquireDuration, e = m.Float64Histogram(telemetry.MetricAcquireDuration, metric.WithUnit("s"),
		metric.WithDescription("Time from the start of an acquire to its outcome, including the wait in the queue."),
		metric.WithExplicitBucketBoundaries(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))
	err = errors.Join(err, e)
	ins.acquisitions, e = m.Int64Counter(telemetry.MetricAcquisitions, metric.WithUnit("{acquisition}"),
		metric.WithDescription("Successful acquires (reentrant ones excluded)."))
	err = errors.Join(err, e)
	ins.timeouts, e = m.Int64Counter(telemetry.MetricTimeouts, metric.WithUnit("{acquire}"),
		metric.WithDescription("Acquires that ended because their context's deadline passed."))
	err = errors.Join(err, e)
	ins.losses, e = m.Int64Counter(telemetry.MetricLosses, metric.WithUnit("{hold}"),
		metric.WithDescription("Holds that lost ownership, by reason."))
	err = errors.Join(err, e)
	ins.holders, e = m.Int64UpDownCounter(telemetry.MetricHolders, metric.WithUnit("{hold}"),
		metric.WithDescription("Holds currently in force in this process."))
	err = errors.Join(err, e)
	ins.holdDuration, e = m.Float64Histogram(telemetry.MetricHoldDuration, metric.WithUnit("s"),
		metric.WithDescription("How long holds lasted, by how they ended (released, lost, max_hold)."),
		metric.WithExplicitBucketBoundaries(0.001, 0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600))
	err = errors.Join(err, e)
	ins.waiters, e = m.Int64UpDownCounter(telemetry.MetricWaiters, metric.WithUnit("{acquire}"),
		metric.WithDescription("Acquires currently in progress in this process, waiting or looking (TryLock)."))
	err = errors.Join(err, e)
	return ins, err
}

// lossReason names a loss reason for the loss_reason attribute.
func lossReason(err error) string {
	switch {
	case errors.Is(err, ErrSessionExpired):
		return "session_expired"
	case errors.Is(err, ErrNodeDeleted):
		return "node_deleted"
	case errors.Is(err, ErrConnectionSuspended):
		return "connection_suspended"
	case errors.Is(err, ErrClosed):
		return "client_closed"
	case errors.Is(err, ErrMaxHoldExceeded):
		return "max_hold"
	default:
		return "other"
	}
}

// recipeAttrs returns the metric attribute set of a recipe, built once per Lock.
func recipeAttrs(recipe string) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(telemetry.AttrRecipe.String(recipe)))
}

// Bounds on the text a span carries from outside the library's control.
// Node data may be anything up to the server's jute.maxbuffer (about
// 1 MiB): a waiter's span copies only the start of it. An error message
// can quote node data too (a mismatched directory's data, say).
const (
	maxAttrData    = 256  // bytes of node data in an attribute
	maxAttrMessage = 1024 // bytes of an error message in an exception event or the status
)

// dataAttr returns node data as an attribute value: valid UTF-8 (each
// byte that is not is replaced by U+FFFD) of at most maxAttrData bytes,
// cut at a character boundary and then marked "…(cut, N bytes)", N being
// the data's full length. Short UTF-8 data is returned as it is.
func dataAttr(data []byte) string {
	// clip never reads past maxAttrData+utf8.UTFMax bytes: its output
	// grows at least as fast as its input is read.
	return clip(string(data[:min(len(data), maxAttrData+utf8.UTFMax)]), len(data), maxAttrData)
}

// clip returns s, the first bytes of a text of full bytes, as valid UTF-8
// of at most limit bytes, plus the "…(cut, N bytes)" mark when the text
// was cut.
func clip(s string, full, limit int) string {
	if len(s) == full && len(s) <= limit && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if b.Len()+utf8.RuneLen(r) > limit {
			break
		}
		b.WriteRune(r) // utf8.RuneError, for a byte that is not UTF-8, is U+FFFD
		i += n
	}
	if i < full {
		b.WriteString("…(cut, " + strconv.Itoa(full) + " bytes)")
	}
	return b.String()
}

// recordError records err on span as an exception event and sets the
// span's status to Error. A message longer than maxAttrMessage bytes (one
// that quotes node data) is cut as clip cuts.
func recordError(span trace.Span, err error) {
	msg := err.Error()
	short := clip(msg, len(msg), maxAttrMessage)
	if short == msg {
		span.RecordError(err)
	} else {
		span.AddEvent("exception", trace.WithAttributes(
			attribute.String("exception.type", errorType(err)),
			attribute.String("exception.message", short)))
	}
	span.SetStatus(codes.Error, short)
}

// errorType names the type of err as the OpenTelemetry SDK does in an
// exception event.
func errorType(err error) string {
	t := reflect.TypeOf(err)
	if t.PkgPath() == "" && t.Name() == "" {
		return t.String()
	}
	return t.PkgPath() + "." + t.Name()
}

var outcomes = []string{"acquired", "timeout", "cancelled", "held_elsewhere", "error"}

// recipeTel is what every Lock of one recipe names its spans and labels its
// measurements with. It depends on the recipe's name alone, so all the
// Locks of a recipe share one (recipeTels): a handle made per request or
// per waiter costs no attribute sets of its own.
type recipeTel struct {
	spanName     string
	releaseSpan  string
	attrs        metric.MeasurementOption            // recipe attribute
	endAttrs     map[string]metric.MeasurementOption // recipe + hold.end
	outcomeAttrs map[string]metric.MeasurementOption // recipe + outcome
}

var recipeTels sync.Map // recipe name -> *recipeTel

// telemetryOf returns the shared recipeTel of the recipe named recipe.
func telemetryOf(recipe string) *recipeTel {
	if t, ok := recipeTels.Load(recipe); ok {
		return t.(*recipeTel)
	}
	t := &recipeTel{spanName: recipe + ".acquire", releaseSpan: recipe + ".release", attrs: recipeAttrs(recipe),
		endAttrs:     make(map[string]metric.MeasurementOption, 3),
		outcomeAttrs: make(map[string]metric.MeasurementOption, len(outcomes))}
	for _, e := range []string{"released", "lost", "max_hold"} {
		t.endAttrs[e] = metric.WithAttributeSet(attribute.NewSet(
			telemetry.AttrRecipe.String(recipe), telemetry.AttrHoldEnd.String(e)))
	}
	for _, o := range outcomes {
		t.outcomeAttrs[o] = metric.WithAttributeSet(attribute.NewSet(
			telemetry.AttrRecipe.String(recipe), telemetry.AttrOutcome.String(o)))
	}
	got, _ := recipeTels.LoadOrStore(recipe, t)
	return got.(*recipeTel)
}
