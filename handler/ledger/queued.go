package ledger

import (
	"fmt"
	"time"

	"github.com/convoy-dev/convoy/handler/keyed"
)

// QueueDuplicateWindow is the ledgers queue's
// duplicateDetectionHistoryTimeWindow as deployed (infra/modules/servicebus.bicep)
// and emulated (infra/local/servicebus-emulator-config.json): Service Bus
// drops, without a word to the sender, a message whose MessageId it
// accepted within this window. A ledger's MessageId is its ledgerId.
const QueueDuplicateWindow = 10 * time.Minute

// Queued is what to do with a valid ledger bound for the ledgers queue
// (`convoy publish`, which LedgerIngest then publishes): DecideQueued's.
type Queued struct {
	Send    bool
	Outcome string // "sent" or OutcomeAlreadyPublished
	Note    string // what the queue and LedgerIngest will do with it
}

// outcomeSent is the Outcome of a ledger sent to the ledgers queue.
const outcomeSent = "sent"

// DecideQueued decides, from the ledger's record (nil: none; checked: the
// records could be read, checkErr why not), whether to send a valid ledger
// to the ledgers queue, and what to say. The same ledgerId with other
// content is refused, as an upload is with 409: within the window the queue
// would drop it, after it LedgerIngest would reject it. The same content
// already published is not sent again. A ledger whose id was rejected
// less than a window ago is refused too: the queue would drop it.
func DecideQueued(l *Ledger, rec *Record, checked bool, checkErr error, now time.Time) (Queued, error) {
	id := keyed.Quote(l.ID)
	window := fmt.Sprintf("its duplicate-detection window (%s, as deployed)", minutes(QueueDuplicateWindow))
	at := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	// Each note is one line: what happens to this copy.
	dropped := fmt.Sprintf("the queue drops this copy if ledger %s was sent in the last %s", id, minutes(QueueDuplicateWindow))
	switch {
	case !checked:
		return Queued{Send: true, Outcome: outcomeSent, Note: "not checked against earlier publishes (StateStorage is not set): " + dropped}, nil
	case checkErr != nil:
		return Queued{Send: true, Outcome: outcomeSent, Note: "not checked against earlier publishes (" + checkErr.Error() + "): " + dropped}, nil
	case rec == nil:
		return Queued{Send: true, Outcome: outcomeSent}, nil
	case rec.Status == StatusRejected:
		if until := rec.UpdatedAt.Add(QueueDuplicateWindow); now.Before(until) {
			return Queued{}, fmt.Errorf("ledger %s was rejected at %s, less than the ledgers queue's duplicate-detection window (%s) ago, "+
				"so the queue would drop this one as a duplicate of that message (MessageId = ledgerId): not sent. "+
				"Publish it again after %s, or now with --direct or an upload (POST /api/ledgers), which take the place of a rejected ledger",
				id, at(rec.UpdatedAt), minutes(QueueDuplicateWindow), at(until))
		}
		return Queued{Send: true, Outcome: outcomeSent, Note: fmt.Sprintf("it takes the place of the ledger rejected under this id at %s", at(rec.UpdatedAt))}, nil
	case !l.SameContent(rec.Hash):
		return Queued{}, fmt.Errorf("ledger %s was already received with other content (recorded %s at %s): not sent. "+
			"The ledgers queue would drop it as a duplicate (MessageId = ledgerId) within %s, and LedgerIngest would reject it after that, "+
			"as an upload is refused with 409: give the changed ledger a new ledgerId", id, rec.Status, at(rec.UpdatedAt), window)
	case rec.Status == StatusPublished:
		return Queued{Outcome: OutcomeAlreadyPublished, Note: fmt.Sprintf("already published at %s: not sent again", at(rec.UpdatedAt))}, nil
	default: // publishing: a delivery is de-batching it, or failed part-way
		return Queued{Send: true, Outcome: outcomeSent, Note: fmt.Sprintf("being published (%d sent, the last at %s): this copy resumes it, unless the first was sent "+
			"in the last %s (then that one resumes)", rec.Sent, at(rec.UpdatedAt), minutes(QueueDuplicateWindow))}, nil
	}
}

// minutes writes a whole number of minutes as "10 minutes", anything else as a Duration.
func minutes(d time.Duration) string {
	if d%time.Minute == 0 {
		return fmt.Sprintf("%d minutes", d/time.Minute)
	}
	return d.String()
}
