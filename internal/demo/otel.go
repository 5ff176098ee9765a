package demo

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// SpanPrinter is a span exporter that prints each span compactly, one
// write per span, behind a label: name, duration, ids, attributes, events
// and status. (The SDK's stdouttrace exporter prints the same data as JSON,
// resource and scope included.)
type SpanPrinter struct {
	mu    sync.Mutex
	w     io.Writer
	label string
}

// NewSpanPrinter returns a printer writing to w; label names the process.
func NewSpanPrinter(w io.Writer, label string) *SpanPrinter {
	return &SpanPrinter{w: w, label: label}
}

// ExportSpans prints spans.
func (p *SpanPrinter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range spans {
		// One write per span, so that the lines of processes sharing a
		// terminal do not interleave.
		var b bytes.Buffer
		fmt.Fprintf(&b, "%-7s %-22s %9s  span %s", p.label, s.Name(), Ms(s.EndTime().Sub(s.StartTime())), s.SpanContext().SpanID())
		if s.Parent().IsValid() {
			fmt.Fprintf(&b, "  parent %s", s.Parent().SpanID())
		}
		b.WriteByte('\n')
		for _, kv := range s.Attributes() {
			fmt.Fprintf(&b, "        %-28s %s\n", kv.Key, kv.Value.Emit())
		}
		for _, e := range s.Events() {
			fmt.Fprintf(&b, "        event +%s %s", Ms(e.Time.Sub(s.StartTime())), e.Name)
			for _, kv := range e.Attributes {
				fmt.Fprintf(&b, "  %s=%s", kv.Key, kv.Value.Emit())
			}
			b.WriteByte('\n')
		}
		if st := s.Status(); st.Code == codes.Error {
			fmt.Fprintf(&b, "        status Error: %s\n", st.Description)
		}
		if _, err := p.w.Write(b.Bytes()); err != nil {
			return err
		}
	}
	return nil
}

// Shutdown does nothing: there is nothing to flush.
func (p *SpanPrinter) Shutdown(context.Context) error { return nil }

// PrintMetrics collects what reader holds and prints it behind label, one
// line per counter or histogram and attribute set, in one write.
func PrintMetrics(w io.Writer, label string, reader sdkmetric.Reader) error {
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		return fmt.Errorf("collect metrics: %w", err)
	}
	var b bytes.Buffer
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					fmt.Fprintf(&b, "%-7s metric %s{%s} = %d\n", label, m.Name, attrs(p.Attributes), p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					fmt.Fprintf(&b, "%-7s metric %s{%s} count %d, sum %.4fs\n", label, m.Name, attrs(p.Attributes), p.Count, p.Sum)
				}
			}
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

func attrs(s attribute.Set) string {
	parts := make([]string, 0, s.Len())
	for _, kv := range s.ToSlice() {
		parts = append(parts, string(kv.Key)+"="+kv.Value.Emit())
	}
	return strings.Join(parts, ",")
}
