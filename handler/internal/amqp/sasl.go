package amqp

import "fmt"

// sasl runs the SASL exchange after its protocol header (part 5, section
// 5.3): the server offers Config.Mechanisms, the client picks one, and the
// outcome accepts it or ends the connection.
func (c *Conn) sasl() error {
	if _, err := c.nc.Write(HeaderSASL); err != nil {
		return err
	}
	mechs := make(Array, len(c.cfg.Mechanisms))
	for i, m := range c.cfg.Mechanisms {
		mechs[i] = m
	}
	if err := c.write(Frame{Type: FrameSASL, Body: New(CodeSASLMechanisms, mechs)}); err != nil {
		return err
	}
	f, err := ReadFrame(c.r, c.cfg.MaxFrameSize)
	if err != nil {
		return err
	}
	if f.Body == nil || f.Body.Code != CodeSASLInit {
		return fmt.Errorf("amqp: expected sasl-init, got %v", f.Body)
	}
	mech, _ := f.Body.Field(saslInitMechanism).(Symbol)
	initial, _ := f.Body.Field(saslInitInitialResponse).([]byte)
	ok := false
	for _, m := range c.cfg.Mechanisms {
		ok = ok || m == mech
	}
	if ok && c.cfg.SASL != nil {
		ok = c.cfg.SASL(mech, initial)
	}
	code := saslOK
	if !ok {
		code = saslAuth
	}
	if err := c.write(Frame{Type: FrameSASL, Body: New(CodeSASLOutcome, code)}); err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("amqp: sasl mechanism %q refused", mech)
	}
	return nil
}
