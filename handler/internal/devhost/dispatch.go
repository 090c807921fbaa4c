package devhost

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/convoy-dev/convoy/handler/internal/devbus"
)

// Defaults of the Service Bus extension 5.x (docs/host-contract.md, host.json table).
const (
	defaultMaxConcurrentSessions = 8
	defaultMaxConcurrentCalls    = 16 // per core; the emulation counts one core
	defaultMaxMessageBatchSize   = 1000
)

// listen starts an instance's listener for a Service Bus trigger. Single
// dispatch with sessions: maxConcurrentSessions session receivers, one
// message at a time per session, each session lock renewed for
// maxAutoLockRenewalDuration from its acceptance. Batch dispatch with
// sessions: one session at a time per instance, its lock never renewed.
// Without sessions: maxConcurrentCalls receivers, each message lock renewed
// for maxAutoLockRenewalDuration from its receipt.
func (in *Instance) listen(f Function) {
	h := in.host
	q := h.queues[f.Trigger.QueueName]
	renewFor := h.scale(h.app.MaxAutoLockRenewal)
	run := in.runCtx()
	if !f.Trigger.IsSessionsEnabled {
		for range maxConcurrentCalls(h.app) {
			in.lwg.Add(1)
			go func() {
				defer in.lwg.Done()
				for {
					m, settle := q.Receive(run, renewFor)
					if m == nil {
						return
					}
					msgs := []*devbus.Message{m}
					in.settled(f, msgs, settle(in.report(f, msgs, h.invoke(run, in, f, msgs))))
				}
			}()
		}
		return
	}
	workers, batch := maxConcurrentSessions(h.app), 1
	if f.batch() {
		workers, batch, renewFor = 1, maxMessageBatchSize(h.app), 0
	}
	for range workers {
		in.lwg.Add(1)
		go func() {
			defer in.lwg.Done()
			for {
				lock := q.AcceptSession(run, renewFor)
				if lock == nil {
					return
				}
				for {
					msgs, err := lock.Next(run, batch, h.app.SessionIdleTimeout)
					if err != nil {
						in.logf("%s: session %s: %v; the receiver closes it", f.Name, lock.SessionID(), err)
					}
					if len(msgs) == 0 {
						break
					}
					ok := in.report(f, msgs, h.invoke(run, in, f, msgs))
					if err := lock.Settle(msgs, ok); err != nil {
						in.settled(f, msgs, err)
						break
					}
				}
				lock.Release()
			}
		}()
	}
}

func maxConcurrentSessions(a *App) int {
	if n := a.Host.Extensions.ServiceBus.MaxConcurrentSessions; n > 0 {
		return n
	}
	return defaultMaxConcurrentSessions
}

func maxConcurrentCalls(a *App) int {
	if n := a.Host.Extensions.ServiceBus.MaxConcurrentCalls; n > 0 {
		return n
	}
	return defaultMaxConcurrentCalls
}

func maxMessageBatchSize(a *App) int {
	if n := a.Host.Extensions.ServiceBus.MaxMessageBatchSize; n > 0 {
		return n
	}
	return defaultMaxMessageBatchSize
}

// report logs a failed invocation and tells whether the messages should be
// completed.
func (in *Instance) report(f Function, msgs []*devbus.Message, err error) bool {
	if err != nil && !errors.Is(err, errHostStopped) {
		in.logf("%s failed (%s, delivery %d): %v", f.Name, describeMsgs(msgs), msgs[0].DeliveryCount, err)
	}
	return err == nil
}

// settled logs a settlement that failed: after a lost lock the SDK neither
// completes nor abandons; the messages come back when the lock expires.
func (in *Instance) settled(f Function, msgs []*devbus.Message, err error) {
	if err != nil {
		in.host.lockLosses.Add(1)
		in.logf("%s: settling %s failed: %v (they come back with DeliveryCount +1)", f.Name, describeMsgs(msgs), err)
	}
}

func describeMsgs(msgs []*devbus.Message) string {
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.MessageID
	}
	s := strings.Join(ids, ",")
	if msgs[0].SessionID != "" {
		s = "session " + msgs[0].SessionID + ": " + s
	}
	return s
}

// invoke runs a Service Bus triggered function on one instance, unless an
// injected fault fails it first.
func (h *Host) invoke(ctx context.Context, in *Instance, f Function, msgs []*devbus.Message) error {
	h.calls.Add(1)
	defer h.calls.Add(-1)
	if fault := h.fault.Load(); fault != nil {
		if err := (*fault)(f.Name, msgs); err != nil {
			h.invocations.Add(1)
			h.failures.Add(1)
			return err
		}
	}
	_, err := in.call(ctx, f.Name, "/"+f.Name, EncodeInvocation(f, msgs, time.Now()))
	return err
}

// scaleTarget is target-based scaling for one trigger, as
// ServiceBusTargetScaler computes it: ceil(active messages / concurrency),
// where concurrency is maxMessageBatchSize for a batch trigger,
// maxConcurrentSessions for a session trigger, maxConcurrentCalls otherwise.
// (docs/host-contract.md says sessions / maxConcurrentSessions; the scaler only
// sees the queue's active message count, so it divides messages.)
func scaleTarget(a *App, f Function, st devbus.QueueStats) int {
	switch {
	case f.batch():
		return ceilDiv(st.Active, maxMessageBatchSize(a))
	case f.Trigger.IsSessionsEnabled:
		return ceilDiv(st.Active, maxConcurrentSessions(a))
	}
	return ceilDiv(st.Active, maxConcurrentCalls(a))
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// groupTarget is how many instances a group's work asks for: the largest
// target of its Service Bus triggers, or for the HTTP group the requests in
// flight and waiting over the per-instance HTTP concurrency; never below
// the group's always-ready count.
func (h *Host) groupTarget(g *group) int {
	want := h.opts.MinInstances
	for _, f := range g.functions {
		if f.Trigger.Type == "serviceBusTrigger" {
			want = max(want, scaleTarget(h.app, f, h.queues[f.Trigger.QueueName].Stats()))
		}
	}
	if g.name == groupHTTP {
		demand := int(h.httpWaiting.Load())
		for _, in := range h.Group(groupHTTP) {
			demand += int(in.inflight.Load())
		}
		want = max(want, ceilDiv(demand, h.opts.HTTPConcurrency))
	}
	return want
}

// scaleOut is the scale controller of per-function scaling: each group
// scales on its own target; the instances of all groups together stay
// within Options.MaxInstances (maximumInstanceCount is the app's). A group
// whose target stays below its instance count for Options.ScaleInAfter
// loses its newest instance (drained first), down to MinInstances. An
// instance whose host stopped is not replaced: the platform recycles it.
func (h *Host) scaleOut() {
	defer h.wg.Done()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-tick.C:
		}
		for _, g := range h.groups {
			want := h.groupTarget(g)
			h.mu.Lock()
			n, total := len(g.instances), h.total()
			h.mu.Unlock()
			switch {
			case want > n && total < h.opts.MaxInstances:
				g.idleSince = time.Time{}
				in, err := h.addInstance(g)
				if err != nil {
					if h.ctx.Err() == nil {
						h.log.Printf("scale out %s to %d instances: %v", g.name, n+1, err)
					}
					continue
				}
				h.log.Printf("scaled out %s to %d instances (target %d; %d in the app)", g.name, n+1, want, total+1)
				_ = in
			case want < n && n > h.opts.MinInstances:
				if g.idleSince.IsZero() {
					g.idleSince = time.Now()
				}
				if time.Since(g.idleSince) < h.scale(h.opts.ScaleInAfter) {
					continue
				}
				g.idleSince = time.Time{}
				h.mu.Lock()
				in := g.instances[n-1]
				g.instances = g.instances[:n-1]
				h.mu.Unlock()
				h.httpNotify()
				h.log.Printf("scaling in %s to %d instances: draining instance %d", g.name, n-1, in.ID)
				h.wg.Add(1)
				go func() {
					defer h.wg.Done()
					in.drain()
				}()
			default:
				g.idleSince = time.Time{}
			}
		}
	}
}
