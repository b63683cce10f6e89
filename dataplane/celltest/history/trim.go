package history

// MayTrim records that the log start of partition part may be moved up to
// offset (a DeleteRecords or retention decision asked for it; whether it
// committed may be unknown): records below it may be absent from later
// reads, and only those.
func (c *Checker) MayTrim(part int32, offset int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.trimmed[part] = max(c.trimmed[part], offset)
}

// Skipped records that reader found its position from on partition part
// below the log start and moved on to to, as a consumer with
// auto.offset.reset=earliest does: a poll skip unless the log start may
// have been moved that far.
func (c *Checker) Skipped(reader string, part int32, from, to int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if to > c.trimmed[part] {
		c.violate(PollSkip, "reader %s on partition %d: offsets %d to %d are gone, but the log start was moved only up to %d", reader, part, from, to, c.trimmed[part])
	}
}
