package httpapi

// DropSessions forgets every HTTP member's in-memory state, as a
// coordinator that restarts or takes a group over starts.
func (s *Server) DropSessions() {
	s.sessions.mu.Lock()
	defer s.sessions.mu.Unlock()
	s.sessions.m = nil
}
