package tablestore

import "github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

// Table Storage says "not there" with three codes: a missing row is
// ResourceNotFound or EntityNotFound (which one depends on the operation,
// and Azure and Azurite do not always agree), a missing table TableNotFound
// (tables are created by Bicep in Azure, locally on first write, so a read
// can come first). Each caller decides what absence means to it (an empty
// read, a delete done already, a conditional write that lost); these say
// only which answers are absence.

// isAbsent reports whether err says the row, or its whole table, is not
// there.
func isAbsent(err error) bool { return entityAbsent(err) || tableAbsent(err) }

// entityAbsent reports whether err says the row is not there (its table
// is).
func entityAbsent(err error) bool {
	switch tableCode(err) {
	case aztables.ResourceNotFound, aztables.EntityNotFound:
		return true
	}
	return false
}

// tableAbsent reports whether err says the table is not there.
func tableAbsent(err error) bool { return tableCode(err) == aztables.TableNotFound }

// goneOrChanged reports whether a write or delete under the ETag a row was
// read with found it gone, or written again since: either way, what was
// read is no longer there.
func goneOrChanged(err error) bool {
	return isAbsent(err) || tableCode(err) == aztables.UpdateConditionNotSatisfied
}

// lostRace reports whether a conditional write lost to another writer: the
// row it inserts exists, or the row it replaces or merges (or a row it
// deletes in the same transaction) has another ETag or is gone. A missing
// table is not a race.
func lostRace(err error) bool {
	switch tableCode(err) {
	case aztables.EntityAlreadyExists, aztables.UpdateConditionNotSatisfied:
		return true
	}
	return entityAbsent(err)
}
