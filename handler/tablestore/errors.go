package tablestore

import (
	"errors"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/convoy-dev/convoy/handler/fault"
)

// tableCode returns the Table service error code of err (for a failed
// transaction, the failing operation's: changesetOutcome).
func tableCode(err error) aztables.TableErrorCode {
	var re *azcore.ResponseError
	if !errors.As(err, &re) {
		return ""
	}
	return aztables.TableErrorCode(re.ErrorCode)
}

// classify: throttling, timeouts, server errors and network failures are
// transient, by status or by the service's error code (common to every
// storage service: "Common REST API error codes"); any other response is a
// bug or a misconfiguration. An error classified already (a malformed
// transaction answer) keeps its class.
func classify(err error, what string) error {
	var fe *fault.Error
	if errors.As(err, &fe) {
		return fault.Wrap(fe.Code, err, what)
	}
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		switch s := re.StatusCode; {
		case s == http.StatusTooManyRequests, s == http.StatusRequestTimeout, s >= 500,
			re.ErrorCode == "ServerBusy", re.ErrorCode == "OperationTimedOut", re.ErrorCode == "InternalError":
			return fault.Wrap(fault.Unavailable, err, what)
		case s == http.StatusForbidden, s == http.StatusUnauthorized:
			return fault.Wrap(fault.Unavailable, err, what+": access denied (check the identity's Storage Table Data Contributor role)")
		}
		return fault.Wrap(fault.Internal, err, what)
	}
	return fault.Wrap(fault.Unavailable, err, what)
}

// classifyOrNil is classify, except that nil stays nil and an error
// classified already is returned as it is.
func classifyOrNil(err error, what string) error {
	if err == nil {
		return nil
	}
	var fe *fault.Error
	if errors.As(err, &fe) {
		return err
	}
	return classify(err, what)
}

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
