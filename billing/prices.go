package billing

import (
	"math"
	"time"
)

// Price is a plan's list price of one meter.
type Price struct {
	Meter string `json:"meter"`
	// Unit is what UnitPrice buys, in the meter's own terms.
	Unit string `json:"unit"`
	// UnitSize is how many of the meter's values make a Unit (bytes in
	// a GiB, seconds in a partition-hour, ...).
	UnitSize float64 `json:"-"`
	// UnitPrice is US dollars per Unit.
	UnitPrice float64 `json:"unit_price"`
}

const gib = 1 << 30

// PricesEffective is the date the list prices below took effect.
const PricesEffective = "2026-12-01"

// ListPrices are the plans' list prices, the one table /v1/billing and the
// console estimate the month's charges from; docs/pricing.md publishes the
// same table and why each price is what it is (TestPricesDocumented keeps
// the two equal). Free costs nothing (its quotas bound it); dedicated pays
// for its capacity by contract, so its partitions are not charged and its
// throughput and storage cost less. Stripe prices its meters itself: this
// table is what the tenant is shown, and the operator sets the meters'
// Stripe prices from it.
var ListPrices = map[string][]Price{
	"free": {},
	"standard": {
		{Meter: "bytes_in", Unit: "GiB", UnitSize: gib, UnitPrice: 0.06},
		{Meter: "bytes_out", Unit: "GiB", UnitSize: gib, UnitPrice: 0.04},
		{Meter: "partition_seconds", Unit: "partition-hour", UnitSize: 3600, UnitPrice: 0.0015},
		{Meter: "storage_byte_seconds", Unit: "GiB-hour", UnitSize: gib * 3600, UnitPrice: 0.0004},
	},
	"dedicated": {
		{Meter: "bytes_in", Unit: "GiB", UnitSize: gib, UnitPrice: 0.03},
		{Meter: "bytes_out", Unit: "GiB", UnitSize: gib, UnitPrice: 0.02},
		{Meter: "storage_byte_seconds", Unit: "GiB-hour", UnitSize: gib * 3600, UnitPrice: 0.0003},
	},
}

// Line is one meter's month-to-date charge.
type Line struct {
	Price
	Value  int64   `json:"value"`
	Amount float64 `json:"amount"`
}

// Estimate is a tenant's charges for the month holding now.
type Estimate struct {
	Plan       string    `json:"plan"`
	Currency   string    `json:"currency"`
	MonthStart time.Time `json:"month_start"`
	Lines      []Line    `json:"lines"`
	// MonthToDate sums Lines; Projected extends it linearly to the
	// month's end.
	MonthToDate float64 `json:"month_to_date"`
	Projected   float64 `json:"projected"`
}

// Estimate prices totals (meter → value since the start of now's UTC
// month) at plan's list prices, to the cent.
func EstimateFor(plan string, totals map[string]int64, now time.Time) Estimate {
	now = now.UTC()
	start := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	end := start.AddDate(0, 1, 0)
	e := Estimate{Plan: plan, Currency: "usd", MonthStart: start, Lines: []Line{}}
	for _, p := range ListPrices[plan] {
		v := totals[p.Meter]
		l := Line{Price: p, Value: v, Amount: cents(float64(v) / p.UnitSize * p.UnitPrice)}
		e.Lines = append(e.Lines, l)
		e.MonthToDate += l.Amount
	}
	e.MonthToDate = cents(e.MonthToDate)
	if el := now.Sub(start); el > 0 {
		e.Projected = cents(e.MonthToDate * float64(end.Sub(start)) / float64(el))
	}
	return e
}

func cents(x float64) float64 { return math.Round(x*100) / 100 }
