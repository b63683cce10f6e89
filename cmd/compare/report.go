package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// row is one measured quantity of the comparison, one value per run.
type row struct {
	metric string
	sluice []float64
	nats   []float64
	format func(float64) string
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// ratio is a/b as "1.23×", or "n/a" when b is zero.
func ratio(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

// cell is "median (run 1 / run 2 / …)", or just the value for one run.
func cell(v []float64, f func(float64) string) string {
	if len(v) == 0 {
		return "—"
	}
	if len(v) == 1 {
		return f(v[0])
	}
	runs := make([]string, len(v))
	for i, x := range v {
		runs[i] = f(x)
	}
	return fmt.Sprintf("**%s** (%s)", f(median(v)), strings.Join(runs, " / "))
}

// renderTable is the comparison as a Markdown table: medians in bold with
// every run's value after them, and the ratio of the medians.
func renderTable(rows []row) string {
	var b strings.Builder
	b.WriteString("| metric | Sluice | NATS JetStream | Sluice / NATS |\n|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", r.metric, cell(r.sluice, r.format), cell(r.nats, r.format),
			ratio(median(r.sluice), median(r.nats)))
	}
	return b.String()
}

// Formats of the table's figures.
func fmtCount(v float64) string { return groupThousands(int64(v + 0.5)) }
func fmtMB(v float64) string    { return fmt.Sprintf("%.1f", v) }
func fmtMs(v float64) string    { return fmt.Sprintf("%.2f", v) }
func fmtCPU(v float64) string   { return fmt.Sprintf("%.1f", v) }
func fmtRatio(v float64) string { return fmt.Sprintf("%.2f×", v) }

// groupThousands writes n with commas between groups of three digits.
func groupThousands(n int64) string {
	s := fmt.Sprint(n)
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

// Markers around the generated part of the section in docs/benchmarks.md.
const (
	sectionHeading = "## Sluice vs NATS JetStream"
	markBegin      = "<!-- compare:begin (written by `make bench`; edit outside the markers) -->"
	markEnd        = "<!-- compare:end -->"
)

// replaceSection puts generated between the markers of doc, leaving the
// rest of the document as it was. A document without the markers gets the
// section heading and the markers appended at its end; a document with
// only one of them, or with them out of order, is refused rather than
// guessed at.
func replaceSection(doc, generated string) (string, error) {
	i, j := strings.Index(doc, markBegin), strings.Index(doc, markEnd)
	switch {
	case i < 0 && j < 0:
		if doc != "" && !strings.HasSuffix(doc, "\n") {
			doc += "\n"
		}
		return doc + "\n" + sectionHeading + "\n\n" + markBegin + "\n" + generated + markEnd + "\n", nil
	case i < 0 || j < 0 || j < i:
		return "", errors.New("benchmarks doc: compare markers are unpaired or out of order; fix them by hand")
	}
	if !strings.HasSuffix(generated, "\n") {
		generated += "\n"
	}
	return doc[:i+len(markBegin)] + "\n" + generated + doc[j:], nil
}
