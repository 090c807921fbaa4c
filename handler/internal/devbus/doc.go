// Package devbus is a development and test tool, never used in Azure: a
// local emulation of a Service Bus namespace, faithful to
// docs/host-contract.md. Its queues (queue*.go) model sessions, peek-locks,
// deferral, scheduling, expiry, duplicate detection and dead-lettering; its
// AMQP 1.0 face (bus*.go, over package amqp) serves them, with $cbs and
// $management, to any Service Bus SDK. It knows nothing of the Functions
// host: package devhost triggers functions from its queues.
package devbus
