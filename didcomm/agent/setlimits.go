package agent

// SetLimits replaces the endpoint's limits (DefaultLimits until then);
// call it before serving. Tests that queue many messages for one leaf in
// a moment use it, as an operator's configuration would. It fails only if
// the refusals' problem reports cannot be packed.
func (s *Service) SetLimits(l Limits) error {
	lim := newLimiter(l)
	refusals, err := newRefusals(lim, s.did, s.packer)
	if err != nil {
		return err
	}
	s.limits, s.refusals = lim, refusals
	return nil
}
