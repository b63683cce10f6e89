package main

import "github.com/sluicehq/sluice/contract/wire"

// offsetsImported is the report's acknowledgement of moving tenants'
// imported offsets, from the coordinator while it runs (none before).
func (p *brokerParts) offsetsImported() []wire.OffsetsImport {
	if c := p.coord.Load(); c != nil {
		return c.OffsetsImported()
	}
	return nil
}
