package httpapi

// DropSessions forgets every HTTP member's in-memory state, as a
// coordinator that restarts or takes a group over starts.
func (s *Server) DropSessions() {
	s.sessions.mu.Lock()
	defer s.sessions.mu.Unlock()
	s.sessions.m = nil
}

// AfterDeadLetter makes f run after a dead letter is published and
// before its offset is committed.
func (s *Server) AfterDeadLetter(f func()) { s.afterDeadLetter.Store(&f) }
