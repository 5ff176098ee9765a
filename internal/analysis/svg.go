package analysis

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"sort"
	"time"
)

// svg draws the run's history: a row per worker, grouped by workload,
// each hold a bar (green: released, orange: told lost), each refused or
// unknown operation a tick, and every fault a shaded band from its start
// to the ensemble being whole again, named at the top.
func (res *Result) svg() []byte {
	ops, ivs, faults := res.history.snapshot()
	var t0, t1 time.Time
	see := func(t time.Time) {
		if t.IsZero() {
			return
		}
		if t0.IsZero() || t.Before(t0) {
			t0 = t
		}
		if t.After(t1) {
			t1 = t
		}
	}
	for _, iv := range ivs {
		see(iv.Start)
		see(iv.End)
	}
	for _, f := range faults {
		see(f.Start)
		see(f.Whole)
	}
	type row struct {
		load   string
		worker int
	}
	rowOf := map[int]int{}
	var rows []row
	for _, iv := range ivs {
		if _, ok := rowOf[iv.Worker]; !ok {
			rowOf[iv.Worker] = -1
			rows = append(rows, row{iv.Workload, iv.Worker})
		}
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].load != rows[j].load {
			return rows[i].load < rows[j].load
		}
		return rows[i].worker < rows[j].worker
	})
	for i, r := range rows {
		rowOf[r.worker] = i
	}
	const left, top, rowH, width = 170, 60, 12, 1100
	height := top + rowH*len(rows) + 40
	span := t1.Sub(t0).Seconds()
	if span <= 0 {
		span = 1
	}
	x := func(t time.Time) float64 { return left + t.Sub(t0).Seconds()/span*(width-left-10) }
	var b bytes.Buffer
	esc := func(s string) string {
		var e bytes.Buffer
		_ = xml.EscapeText(&e, []byte(s))
		return e.String()
	}
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="10">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="16" font-size="13">%s</text>`+"\n",
		esc(fmt.Sprintf("%d members, seed %d, %v: holds (green released, orange told lost), refused (red) and unknown (grey) operations, faults shaded", res.Members, res.Seed, t1.Sub(t0).Round(time.Second))))
	for i, f := range faults {
		x0, x1 := x(f.Start), x(f.Whole)
		fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#d0d8ff" opacity="0.6"/>`+"\n", x0, top-8, max(x1-x0, 1), rowH*len(rows)+8)
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#6070c0" stroke-dasharray="2,2"/>`+"\n", x(f.Healed), x(f.Healed), top-8, top+rowH*len(rows))
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" fill="#304090">%s</text>`+"\n", x0, 30+12*(i%2), esc(f.Kind))
	}
	last := ""
	for i, r := range rows {
		y := top + i*rowH
		label := fmt.Sprintf("worker %d", r.worker)
		if r.load != last {
			label = r.load + " · " + label
			last = r.load
			fmt.Fprintf(&b, `<line x1="0" x2="%d" y1="%d" y2="%d" stroke="#999"/>`+"\n", width, y, y)
		}
		fmt.Fprintf(&b, `<text x="4" y="%d">%s</text>`+"\n", y+9, esc(label))
	}
	for _, iv := range ivs {
		color := "#3a3"
		if iv.Lost {
			color = "#e80"
		}
		y := top + rowOf[iv.Worker]*rowH + 2
		fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", x(iv.Start), y, max(x(iv.End)-x(iv.Start), 0.8), rowH-4, color)
	}
	for _, o := range ops {
		r, ok := rowOf[o.Worker]
		if !ok || o.Status == OK {
			continue
		}
		color := "#c00"
		if o.Status == Unknown {
			color = "#666"
		}
		y := top + r*rowH
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="%s" stroke-width="1.5"/>`+"\n", x(o.Return), x(o.Return), y, y+rowH, color)
	}
	for s := 0; s <= int(span); s += 10 {
		xs := x(t0.Add(time.Duration(s) * time.Second))
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%ds</text>`+"\n", xs, height-20, s)
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}
