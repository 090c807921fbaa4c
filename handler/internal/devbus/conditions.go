package devbus

import "github.com/convoy-dev/convoy/handler/internal/amqp"

// Error conditions Service Bus uses (docs/host-contract.md, "Service Bus on
// the wire"; the SDKs' error tables). They sit below both the queues, which
// decide some of them (a send refused), and the AMQP face, which answers
// with them all.
const (
	CondServerBusy          amqp.Symbol = "com.microsoft:server-busy"
	CondTimeout             amqp.Symbol = "com.microsoft:timeout"
	condMessageLockLost     amqp.Symbol = "com.microsoft:message-lock-lost"
	condSessionLockLost     amqp.Symbol = "com.microsoft:session-lock-lost"
	condSessionCannotLock   amqp.Symbol = "com.microsoft:session-cannot-be-locked"
	condDeadLetter          amqp.Symbol = "com.microsoft:dead-letter"
	condArgumentOutOfRange  amqp.Symbol = "com.microsoft:argument-out-of-range"
	condMessageNotFound     amqp.Symbol = "com.microsoft:message-not-found"
	condEntityAlreadyExists amqp.Symbol = "com.microsoft:entity-already-exists"
)
