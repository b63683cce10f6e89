package billing_test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/billing"
)

// TestPricesDocumented: docs/pricing.md's table is billing.ListPrices,
// row for row, so the published prices are the ones the estimate uses.
func TestPricesDocumented(t *testing.T) {
	raw, err := os.ReadFile("../docs/pricing.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	if !strings.Contains(doc, "Effective "+billing.PricesEffective) {
		t.Errorf("docs/pricing.md does not say the prices took effect %s", billing.PricesEffective)
	}
	type row struct{ plan, meter, unit string }
	documented := map[row]float64{}
	for _, line := range strings.Split(doc, "\n") {
		cells := strings.Split(strings.Trim(line, "| "), "|")
		if len(cells) != 4 {
			continue
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		price, err := strconv.ParseFloat(cells[3], 64)
		if err != nil {
			continue // the header and its rule
		}
		documented[row{cells[0], cells[1], cells[2]}] = price
	}
	n := 0
	for plan, prices := range billing.ListPrices {
		for _, p := range prices {
			n++
			got, ok := documented[row{plan, p.Meter, p.Unit}]
			if !ok || got != p.UnitPrice {
				t.Errorf("%s %s: $%v per %s in code, docs/pricing.md has %v (listed %v)", plan, p.Meter, p.UnitPrice, p.Unit, got, ok)
			}
		}
	}
	if len(documented) != n {
		t.Errorf("docs/pricing.md lists %d prices, billing.ListPrices %d", len(documented), n)
	}
}
