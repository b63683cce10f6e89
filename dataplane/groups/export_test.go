package groups

// Checks counts the coordinator's periodic checks so far.
func (c *Coordinator) Checks() int64 { return c.checks.Load() }
