package sample

// Constraint restricts which tokens may come next, such as a grammar. A
// generation loop applies it first, before any sampler stage, so that the
// logit bias, the penalties, the log-probabilities and the draw all see the
// masked logits:
//
//	if c.Done() { stop }
//	c.Mask(logits)           // disallowed tokens become -Inf
//	tok := sampler.Sample(logits)
//	if end-of-generation token { only where c.CanEnd() }
//	c.Accept(tok)
type Constraint interface {
	// Mask sets the logits of the tokens that may not come next to -Inf.
	// End-of-generation tokens are the loop's business: it allows them
	// exactly where CanEnd is true, whatever Mask did to them.
	Mask(logits []float32)
	// Accept advances past tok; an error means tok was not allowed.
	Accept(tok int32) error
	// CanEnd reports whether the text so far is complete, so generation
	// may end here.
	CanEnd() bool
	// Done reports whether the text can only end here (nothing may
	// follow), so generation ends without sampling.
	Done() bool
}
