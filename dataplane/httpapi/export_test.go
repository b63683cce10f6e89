package httpapi

import "net/http"

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

// BeforeReadWrite makes f run between a read's answer computed and its
// writing.
func (s *Server) BeforeReadWrite(f func(*http.Request)) { s.beforeReadWrite.Store(&f) }

// The publish request's types, for the package's black-box tests to
// build requests with; openapi_test.go pins their JSON to the document.
type (
	PublishRequest = publishRequest
	PublishMessage = publishMessage
	JSONHeader     = jsonHeader
)
