package cellview

import "slices"

// NoteKeyUse records that an API key was used on this broker (Kafka or the
// HTTP data API), for the next report: the control plane keeps each key's
// last_used_at. The set is bounded by the keys the cell knows.
func (s *Syncer) NoteKeyUse(keyID string) {
	if keyID == "" {
		return
	}
	s.usedMu.Lock()
	defer s.usedMu.Unlock()
	if s.used == nil {
		s.used = map[string]struct{}{}
	}
	s.used[keyID] = struct{}{}
}

// TakeKeysUsed returns the keys used since the last call, sorted, and
// forgets them.
func (s *Syncer) TakeKeysUsed() []string {
	s.usedMu.Lock()
	used := s.used
	s.used = nil
	s.usedMu.Unlock()
	ids := make([]string, 0, len(used))
	for id := range used {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
