package recipe

import (
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

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
