package devbus

import "github.com/convoy-dev/convoy/handler/internal/amqp"

// Error conditions Service Bus uses (docs/host-contract.md, "Service Bus on
// the wire"; the SDKs' error tables). They sit below both the queues, which
// decide some of them (a send refused), and the AMQP face, which answers
// with them all.
const (
	CondServerBusy          amqp.Symbol = "com.microsoft:server-busy"
	CondTimeout             amqp.Symbol = "com.microsoft:timeout"
	CondMessageLockLost     amqp.Symbol = "com.microsoft:message-lock-lost"
	CondSessionLockLost     amqp.Symbol = "com.microsoft:session-lock-lost"
	CondSessionCannotLock   amqp.Symbol = "com.microsoft:session-cannot-be-locked"
	CondDeadLetter          amqp.Symbol = "com.microsoft:dead-letter"
	CondArgumentOutOfRange  amqp.Symbol = "com.microsoft:argument-out-of-range"
	CondMessageNotFound     amqp.Symbol = "com.microsoft:message-not-found"
	CondEntityAlreadyExists amqp.Symbol = "com.microsoft:entity-already-exists"
)
