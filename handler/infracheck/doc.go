// Package infracheck has no code, only tests: they parse every Bicep file
// (tree-sitter grammar) and fail when a queue, table, connection setting or
// role that a function needs differs between Bicep, function.json,
// host.json, the local emulator config and the program's settings, or when a
// template carries a secret.
package infracheck
