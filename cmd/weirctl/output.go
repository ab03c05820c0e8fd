package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// writeJSON writes v as indented JSON, without HTML escaping.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// table writes aligned columns, two spaces apart, when flushed.
type table struct {
	w   io.Writer
	buf bytes.Buffer
	tw  *tabwriter.Writer
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{w: w}
	t.tw = tabwriter.NewWriter(&t.buf, 0, 0, 2, ' ', 0)
	if len(header) > 0 {
		t.row(header...)
	}
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		cells[i] = strings.NewReplacer("\t", " ", "\n", " ").Replace(c)
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

// flush writes the rows, without the padding of empty last cells.
func (t *table) flush() error {
	if err := t.tw.Flush(); err != nil {
		return err
	}
	var out bytes.Buffer
	for line := range strings.Lines(t.buf.String()) {
		out.WriteString(strings.TrimRight(line, " \n") + "\n")
	}
	t.buf.Reset()
	_, err := t.w.Write(out.Bytes())
	return err
}

// count formats n with thousands separators: 1234567 gives 1,234,567.
func count(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// percent formats a fraction as a percentage with one decimal: 0.125 gives
// 12.5%.
func percent(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "-"
	}
	return strconv.FormatFloat(f*100, 'f', 1, 64) + "%"
}

// ratio is part/whole as a percentage, "-" when whole is 0.
func ratio(part, whole int64) string {
	if whole == 0 {
		return "-"
	}
	return percent(float64(part) / float64(whole))
}

// window formats seconds in the largest unit that divides them: 60 gives
// 1m, 86400 1d, 90 90s.
func window(sec int64) string {
	for _, u := range []struct {
		n    int64
		name string
	}{{86400, "d"}, {3600, "h"}, {60, "m"}} {
		if sec >= u.n && sec%u.n == 0 {
			return strconv.FormatInt(sec/u.n, 10) + u.name
		}
	}
	return strconv.FormatInt(sec, 10) + "s"
}

// timestamp formats t in UTC, "-" when zero.
func timestamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// orDash returns s, or "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// truncate shortens s to at most n runes, ending it with "…" when cut.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
