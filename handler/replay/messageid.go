package replay

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxMessageIDLength is Service Bus's limit on a MessageId.
const MaxMessageIDLength = 128

// replayMark separates a replayed message's root MessageId from the
// sequence number of the dead-lettered copy it replays.
const replayMark = "#replay-"

// ReplayID is the MessageId of a replayed copy: the root of the dead
// letter's MessageId (the id before any earlier "#replay-", so that a replay
// of a replay does not grow it) followed by "#replay-<sequence number of the
// dead-lettered copy>". It is fixed per dead-lettered copy, so a replay
// re-run after a crash is dropped by duplicate detection, while a message
// dead-lettered again (a new sequence number) is replayed anew. It never
// exceeds MaxMessageIDLength: a root too long to fit is cut and marked with
// "~" and 8 hex digits of its SHA-256 (the sequence number alone already
// makes the id unique within the queue).
func ReplayID(m DeadLetter) string {
	root := m.MessageID
	if i := strings.Index(root, replayMark); i >= 0 {
		root = root[:i]
	}
	suffix := replayMark + strconv.FormatInt(m.SequenceNumber, 10)
	if len(root)+len(suffix) <= MaxMessageIDLength {
		return root + suffix
	}
	sum := sha256.Sum256([]byte(root))
	mark := "~" + hex.EncodeToString(sum[:4])
	keep := MaxMessageIDLength - len(suffix) - len(mark)
	for keep > 0 && !utf8.RuneStart(root[keep]) {
		keep--
	}
	return root[:keep] + mark + suffix
}
