package amqp

// Fields of the performatives the engine reads and writes, by position.
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

	flowNextIncomingID = 0
	flowIncomingWindow = 1
	flowNextOutgoingID = 2
	flowOutgoingWindow = 3
	flowHandle         = 4
	flowDeliveryCount  = 5
	flowLinkCredit     = 6
	flowDrain          = 8
	flowEcho           = 9

	transferHandle     = 0
	transferDeliveryID = 1
	transferTag        = 2
	transferFormat     = 3
	transferSettled    = 4
	transferMore       = 5
	transferAborted    = 10

	dispositionRole    = 0
	dispositionFirst   = 1
	dispositionLast    = 2
	dispositionSettled = 3
	dispositionState   = 4
)
