package memstore

import (
	"fmt"

	"github.com/convoy-dev/convoy/handler/fault"
)

// Table Storage's limits, which every write of memstore is held to, so that
// a test on memstore fails where Azure would refuse the write (issue 42: a
// record that outgrew its property was refused by Azure and accepted here).
//
//   - "Understanding the Table service data model"
//     (https://learn.microsoft.com/en-us/rest/api/storageservices/understanding-the-table-service-data-model):
//     a string is UTF-16 and holds up to 64 KiB, binary up to 64 KiB; at
//     most 255 properties with PartitionKey, RowKey and Timestamp; all the
//     data of an entity up to 1 MiB; PartitionKey and RowKey up to 1 KiB
//     each, without '/', '\', '#', '?' or the control characters U+0000 to
//     U+001F and U+007F to U+009F.
//   - the size of an entity, as the service counts it
//     (https://learn.microsoft.com/en-us/archive/blogs/avkashchauhan/how-the-size-of-an-entity-is-caclulated-in-windows-azure-table-storage):
//     4 + 2×len(PartitionKey+RowKey) + for each property 8 + 2×len(name) +
//     the value's size (a string 4 + 2×len, Int32 4, Int64 and DateTime 8,
//     Boolean 1; lengths in UTF-16 code units).
//   - "Performing entity group transactions"
//     (https://learn.microsoft.com/en-us/rest/api/storageservices/performing-entity-group-transactions):
//     at most 100 operations and a payload of at most 4 MiB, in one
//     partition (every group memstore models is one order's partition, by
//     construction, so that is not checked).
//
// Azure answers each with a 400 (a 413 for the payload), which tablestore
// classifies fault.Internal (classify: neither transient nor access), so a
// refusal here is a fault.Internal too.
const (
	maxPropertyBytes = 64 << 10
	maxEntityBytes   = 1 << 20
	maxProperties    = 255 - 3 // besides PartitionKey, RowKey and Timestamp
	maxKeyBytes      = 1 << 10
	maxGroupOps      = 100
	maxGroupBytes    = 4 << 20
	// opFraming is the multipart framing of one operation of tablestore's
	// $batch body (boundary, headers, request line with the table's URL),
	// about 300 bytes with an Azure endpoint: modelled, not written, so a
	// group within 30 KB of 4 MiB may be judged otherwise than by Azure.
	opFraming = 300
)

// entity measures one entity as tablestore writes it: the caller adds its
// properties as tablestore does (entities.go), and check says which limit
// it breaks. Only sizes are kept: memstore stores Go values, not entities.
type entity struct {
	pk, rk string
	props  int   // properties besides PartitionKey, RowKey and Timestamp
	size   int   // as the service counts it
	body   int   // bytes of the JSON tablestore sends
	err    error // the first property too large
}

func newEntity(pk, rk string) *entity {
	return &entity{pk: pk, rk: rk, size: 4 + 2*(utf16Len(pk)+utf16Len(rk)),
		body: len(`{"PartitionKey":,"RowKey":}`+"\r\n") + jsonLen(pk) + jsonLen(rk)}
}

// add counts a property whose value takes size bytes as the service counts
// them and json bytes in the request.
func (e *entity) add(name string, size, json int) *entity {
	e.props++
	e.size += 8 + 2*utf16Len(name) + size
	e.body += len(`,"":`) + len(name) + json
	return e
}

func (e *entity) str(name, v string) *entity {
	n := 2 * utf16Len(v)
	if n > maxPropertyBytes && e.err == nil {
		e.err = refused(e, "PropertyValueTooLarge: %s takes %d bytes as UTF-16, more than %d", name, n, maxPropertyBytes)
	}
	return e.add(name, 4+n, jsonLen(v))
}

// Typed values at their widest in JSON (Int64 and DateTime carry an
// @odata.type annotation): their few bytes only count toward the payload.
func (e *entity) i32(name string) *entity { return e.add(name, 4, 11) }
func (e *entity) i64(name string) *entity {
	return e.add(name, 8, 2+20+len(`,"@odata.type":"Edm.Int64"`)+len(name))
}
func (e *entity) time(name string) *entity {
	return e.add(name, 8, 2+28+len(`,"@odata.type":"Edm.DateTime"`)+len(name))
}
func (e *entity) bool(name string) *entity { return e.add(name, 1, 5) }

// check returns the first limit e breaks (a fault.Internal), or nil.
func (e *entity) check() error {
	for _, k := range [...]struct{ name, v string }{{"PartitionKey", e.pk}, {"RowKey", e.rk}} {
		if n := 2 * utf16Len(k.v); n > maxKeyBytes {
			return refused(e, "the %s takes %d bytes as UTF-16, more than %d", k.name, n, maxKeyBytes)
		}
		for _, r := range k.v {
			if r == '/' || r == '\\' || r == '#' || r == '?' || r <= 0x1f || r >= 0x7f && r <= 0x9f {
				return refused(e, "the %s holds %q, a character Table Storage does not allow in keys", k.name, r)
			}
		}
	}
	switch {
	case e.err != nil:
		return e.err
	case e.props > maxProperties:
		return refused(e, "TooManyProperties: %d properties besides PartitionKey, RowKey and Timestamp, more than %d", e.props, maxProperties)
	case e.size > maxEntityBytes:
		return refused(e, "EntityTooLarge: %d bytes, more than %d", e.size, maxEntityBytes)
	}
	return nil
}

// group measures an entity-group transaction as tablestore sends it.
type group struct {
	ops, body int
	err       error // the first entity that breaks a limit
}

func (g *group) write(e *entity) {
	g.ops++
	g.body += opFraming + e.body
	if err := e.check(); err != nil && g.err == nil {
		g.err = err
	}
}

// delete counts the deletion of a row (its keys are in the URL, escaped).
func (g *group) delete(pk, rk string) {
	g.ops++
	g.body += opFraming + 3*(len(pk)+len(rk))
}

// check returns the first limit g or one of its entities breaks.
func (g *group) check() error {
	switch {
	case g.err != nil:
		return g.err
	case g.ops > maxGroupOps:
		return fault.Errorf(fault.Internal, "Table Storage would refuse the entity-group transaction: %d operations, more than %d", g.ops, maxGroupOps)
	case g.body > maxGroupBytes:
		return fault.Errorf(fault.Internal, "Table Storage would refuse the entity-group transaction: RequestBodyTooLarge: about %d bytes, more than %d", g.body, maxGroupBytes)
	}
	return nil
}

func refused(e *entity, format string, args ...any) error {
	return fault.Errorf(fault.Internal, "Table Storage would refuse entity (%.40q, %.40q): %s", e.pk, e.rk, fmt.Sprintf(format, args...))
}

// utf16Len is the length of s in UTF-16 code units (a byte that is not
// UTF-8 counts as one: the replacement character).
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n++
		if r >= 0x10000 {
			n++
		}
	}
	return n
}

// jsonLen is the length of s as tablestore writes it in JSON: quoted, '"'
// and '\' escaped with a backslash, control characters as \u00XX.
func jsonLen(s string) int {
	n := 2 + len(s)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			n++
		case c < 0x20:
			n += 5
		}
	}
	return n
}
