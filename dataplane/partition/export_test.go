package partition

// SetMaxProducers changes the producer-id bound for a test; the returned
// function restores it.
func SetMaxProducers(n int) (restore func()) {
	old := maxProducers
	maxProducers = n
	return func() { maxProducers = old }
}
