package amqp

// Fields the engine reads, by their position in the described list (OASIS
// AMQP 1.0: the performatives in part 2, section 2.7; the error in 2.8.14;
// the termini in part 3, section 3.5; SASL in part 5, section 5.3.3), so
// that the code says p.Field(openMaxFrameSize) and the list's order is
// written down once.

// open (part 2, section 2.7.1).
const (
	openContainerID  = 0
	openHostname     = 1
	openMaxFrameSize = 2
	openIdleTimeOut  = 4
)

// begin (part 2, section 2.7.2).
const (
	beginNextOutgoingID = 1
	beginIncomingWindow = 2
)

// attach (part 2, section 2.7.3).
const (
	attachName          = 0
	attachHandle        = 1
	attachRole          = 2
	attachSndSettleMode = 3
	attachRcvSettleMode = 4
	attachSource        = 5
	attachTarget        = 6
	attachInitialCount  = 9
	attachMaxMsgSize    = 10
	attachProperties    = 13
)

// flow (part 2, section 2.7.4).
const (
	flowNextIncomingID = 0
	flowIncomingWindow = 1
	flowNextOutgoingID = 2
	flowOutgoingWindow = 3
	flowHandle         = 4
	flowDeliveryCount  = 5
	flowLinkCredit     = 6
	flowDrain          = 8
	flowEcho           = 9
)

// transfer (part 2, section 2.7.5).
const (
	transferHandle     = 0
	transferDeliveryID = 1
	transferTag        = 2
	transferFormat     = 3
	transferSettled    = 4
	transferMore       = 5
	transferAborted    = 10
)

// disposition (part 2, section 2.7.6).
const (
	dispositionRole    = 0
	dispositionFirst   = 1
	dispositionLast    = 2
	dispositionSettled = 3
	dispositionState   = 4
)

// detach (part 2, section 2.7.7).
const (
	detachHandle = 0
	detachClosed = 1
	detachError  = 2
)

// error (part 2, section 2.8.14).
const (
	errorCondition   = 0
	errorDescription = 1
	errorInfo        = 2
)

// source and target: the address comes first in both (part 3, sections
// 3.5.3 and 3.5.4).
const terminusAddress = 0

// sasl-init (part 5, section 5.3.3.2).
const (
	saslInitMechanism       = 0
	saslInitInitialResponse = 1
)

// sasl-outcome's code (part 5, section 5.3.3.6).
const (
	saslOK   uint8 = 0
	saslAuth uint8 = 1 // authentication failed
)
