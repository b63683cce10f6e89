package groups

import "time"

// Checks counts the coordinator's periodic checks so far.
func (c *Coordinator) Checks() int64 { return c.checks.Load() }

// SetImportLimits sets the size of an import's batches and the wait after
// a failed import, for the test's duration.
func SetImportLimits(t interface{ Cleanup(func()) }, chunkBytes int, retry time.Duration) {
	oldChunk, oldRetry := importChunkBytes, importRetry
	importChunkBytes, importRetry = chunkBytes, retry
	t.Cleanup(func() { importChunkBytes, importRetry = oldChunk, oldRetry })
}
