package langgraph

// ControlWaiters returns the number of control long-polls of runID
// waiting on s, for tests that must act while one is pending.
func ControlWaiters(s *Service, runID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiters[runID])
}
