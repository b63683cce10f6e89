package partition

// SetMaxProducers changes the producer-id bound for a test; the returned
// function restores it.
func SetMaxProducers(n int) (restore func()) {
	old := maxProducers
	maxProducers = n
	return func() { maxProducers = old }
}

// VotedAfter exposes votedAfter: whether the replica's Raft granted a vote
// in a term after term, as read from its stable store.
func (r *Replica) VotedAfter(term uint64) bool { return r.votedAfter(term) }
