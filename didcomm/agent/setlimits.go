package agent

// SetLimits replaces the endpoint's limits (DefaultLimits until then);
// call it before serving. Tests that queue many messages for one leaf in
// a moment use it, as an operator's configuration would.
func (s *Service) SetLimits(l Limits) { s.limits = newLimiter(l) }
